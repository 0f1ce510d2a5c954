package plugin

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/sandbox"
)

// The broker's surface as a sandboxed provider of the same user sees it: a provider under
// pkg/sandbox's sandbox (started through the exec step, as oprov starts one) tries to read the
// command's secret and to be served at the broker's socket.

// sandboxedKnock is the hostile sandboxed provider (OPROV_TEST_BROKER_SANDBOXED=FILE): it reads
// the secret in FILE, or takes the one it is handed in OPROV_TEST_BROKER_SECRET (as if it had
// read it), connects to the broker's socket, proves the secret, and says on stdout how far it
// got: "read: ...", "connect: ...", and "served" once the broker has said the connection is open.
func sandboxedKnock(file string) int {
	secret, err := os.ReadFile(file)
	fmt.Printf("read: %v\n", errText(err))
	if given := os.Getenv("OPROV_TEST_BROKER_SECRET"); given != "" {
		secret = []byte(given)
	}
	s, err := hex.DecodeString(string(secret))
	if err != nil || len(s) != 32 {
		fmt.Println("no secret")
		return 0
	}
	c, err := net.Dial("unix", socketName(s))
	fmt.Printf("connect: %v\n", errText(err))
	if err != nil {
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	ns := make([]byte, 32)
	if _, err := io.ReadFull(c, ns); err != nil {
		fmt.Printf("nonce: %v\n", err)
		return 0
	}
	nc := make([]byte, 32)
	rand.Read(nc)
	c.Write(append(nc, proof(s, "client", ns, nc)...))
	if _, err := io.ReadFull(c, make([]byte, sha256.Size)); err != nil {
		fmt.Printf("proof: %v\n", err)
		return 0
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	if strings.Contains(line, `"ok":true`) {
		fmt.Println("served")
	}
	return 0
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// runSandboxed runs sandboxedKnock under spec (planned for sup) and gives what it said.
func runSandboxed(t *testing.T, spec sandbox.Spec, sup sandbox.Support, file string, secret []byte) string {
	t.Helper()
	self, err := filepath.EvalSymlinks(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	spec.Exec = append(existingPaths([]string{"/lib", "/lib64", "/usr/lib", "/usr/lib64"}), self)
	spec.Write = []string{"/dev/null"}
	spec.Env = []string{"OPROV_TEST_BROKER_SANDBOXED", "OPROV_TEST_BROKER_SECRET", sandboxABIEnv}
	spec, err = sandbox.Plan(spec, sup)
	if err != nil {
		t.Fatal(err)
	}
	args, err := spec.Args(self, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{"OPROV_TEST_BROKER_SANDBOXED=" + file}
	if secret != nil {
		cmd.Env = append(cmd.Env, "OPROV_TEST_BROKER_SECRET="+hex.EncodeToString(secret))
	}
	if v, ok := os.LookupEnv(sandboxABIEnv); ok {
		cmd.Env = append(cmd.Env, sandboxABIEnv+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the sandboxed provider: %v\n%s", err, out)
	}
	return string(out)
}

// sandboxABIEnv is pkg/sandbox's test hook that makes its probe report an older kernel's
// Landlock.
const sandboxABIEnv = "OPROV_TEST_LANDLOCK_ABI"

func existingPaths(ps []string) []string {
	var out []string
	for _, p := range ps {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// A sandboxed provider of the same user can neither read the command's secret (its directory is
// not granted) nor reach the broker's socket, even knowing the secret, even where its sandbox
// grants reading the runtime directory: Landlock's scoping keeps it from abstract sockets made
// outside its sandbox, which a uid check (SO_PEERCRED) cannot.
func TestRemoteShareSandboxedProviderCannotReachTheBroker(t *testing.T) {
	sup := sandbox.Probe()
	if !sup.ScopesAbstractSockets() || !sup.Seccomp {
		t.Skipf("this kernel lacks Landlock's scoping of abstract sockets or seccomp: %+v", sup)
	}
	f := newShareFixture(t)
	secret := f.started(t)
	secrets := f.secrets()
	// The same program unconfined is served: what stops it below is the sandbox.
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"OPROV_TEST_BROKER_SANDBOXED=" + secrets[0]}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "served") {
		t.Fatalf("the program outside a sandbox is not served (the test proves nothing): %v\n%s", err, out)
	}

	out := runSandboxed(t, sandbox.Spec{Name: "default"}, sup, secrets[0], secret)
	t.Logf("under the default sandbox:\n%s", out)
	if !strings.Contains(out, "read: open "+secrets[0]+": permission denied") {
		t.Errorf("a sandboxed provider could read the secret:\n%s", out)
	}
	if !strings.Contains(out, "connect: dial unix @") || !strings.Contains(out, "operation not permitted") || strings.Contains(out, "served") {
		t.Errorf("a sandboxed provider knowing the secret reached the broker:\n%s", out)
	}

	out = runSandboxed(t, sandbox.Spec{Name: "reads the runtime directory", Read: []string{f.runtime}}, sup, secrets[0], nil)
	t.Logf("under a sandbox that may read the runtime directory:\n%s", out)
	if !strings.Contains(out, "read: ok") {
		t.Errorf("the sandbox granted reading the runtime directory, yet the secret was not read (the test proves nothing):\n%s", out)
	}
	if !strings.Contains(out, "operation not permitted") || strings.Contains(out, "served") {
		t.Errorf("a sandboxed provider that read the secret reached the broker:\n%s", out)
	}
}

// On a kernel without that scoping a sandbox (best_effort) leaves abstract sockets open, and the
// secret's file mode is all that is left between a sandboxed provider granted reading the
// runtime directory (or /tmp, or $XDG_RUNTIME_DIR) and the remote providers of the user's run: so
// starts there do not share a connection (no broker, no secret), each connects on its own.
func TestRemoteShareNeedsAbstractSocketScoping(t *testing.T) {
	if sup := sandbox.Probe(); sup.LandlockABI < 5 || !sup.Seccomp {
		t.Skipf("this kernel lacks Landlock ABI 5 or seccomp, which the test's sandbox uses: %+v", sup)
	}
	t.Setenv(sandboxABIEnv, "5") // Landlock as of Linux 6.7 to 6.11: no scoping
	sup := sandbox.Probe()
	f := newShareFixture(t)
	var log strings.Builder
	f.opts.Log = &log
	p, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	call(t, p)
	secrets := f.secrets()
	if len(secrets) > 0 {
		out := runSandboxed(t, sandbox.Spec{Name: "best effort, reads the runtime directory", BestEffort: true, Read: []string{f.runtime}}, sup, secrets[0], nil)
		t.Errorf("without scoping, a start shared a connection (secret %s); a sandboxed provider granted reading the runtime directory says:\n%s", secrets[0], out)
	}
	if !strings.Contains(log.String(), "connecting on its own") || !strings.Contains(log.String(), "Landlock") {
		t.Errorf("-v does not say why the start connected on its own:\n%s", log.String())
	}
}

// sandboxedImpostor is a hostile sandboxed provider whose sandbox may write the runtime directory
// (OPROV_TEST_BROKER_IMPOSTOR=FILE): it puts a secret of its own in the command's secret FILE,
// listens at that secret's socket (Landlock scopes connecting, not binding), says "listening",
// and plays the broker to the first start that comes: it proves its secret, says the connection
// is open, and reports the stream's first line ("got: ...").
func sandboxedImpostor(file string) int {
	s := make([]byte, 32)
	rand.Read(s)
	tmp := file + ".impostor"
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(s)), 0o600); err != nil {
		fmt.Printf("write: %v\n", err)
		return 0
	}
	if err := os.Rename(tmp, file); err != nil {
		fmt.Printf("rename: %v\n", err)
		return 0
	}
	l, err := net.Listen("unix", socketName(s))
	if err != nil {
		fmt.Printf("listen: %v\n", err)
		return 0
	}
	fmt.Println("listening")
	l.(*net.UnixListener).SetDeadline(time.Now().Add(20 * time.Second))
	c, err := l.Accept()
	if err != nil {
		fmt.Printf("accept: %v\n", err)
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	ns := make([]byte, 32)
	rand.Read(ns)
	c.Write(ns)
	got := make([]byte, 32+sha256.Size)
	if _, err := io.ReadFull(c, got); err != nil {
		fmt.Printf("the start's proof: %v\n", err)
		return 0
	}
	c.Write(proof(s, "server", ns, got[:32]))
	c.Write([]byte(`{"ok":true}` + "\n"))
	line, err := bufio.NewReader(c).ReadString('\n')
	fmt.Printf("got: %q %v\n", line, err)
	return 0
}

// A sandboxed provider that may write the runtime directory (a sandbox granted /tmp, or
// $XDG_RUNTIME_DIR) cannot reach the broker, but it can put a secret of its own in the command's
// secret file and listen at that secret's socket: a start must not take it for the broker (it
// would send it the provider's opening, and tofu's calls with the provider's configuration). The
// start checks that what listens is not confined more than itself (no_new_privs, seccomp
// filters), as a sandboxed provider always is.
func TestRemoteShareStartRefusesASandboxedImpostor(t *testing.T) {
	sup := sandbox.Probe()
	if !sup.ScopesAbstractSockets() || !sup.Seccomp {
		t.Skipf("this kernel lacks Landlock's scoping of abstract sockets or seccomp: %+v", sup)
	}
	f := newShareFixture(t)
	f.opts.StartTimeout = 5 * time.Second // part of the command's key: the same for both starts
	p, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	secrets := f.secrets()
	if len(secrets) != 1 {
		t.Fatalf("secrets: %v", secrets)
	}
	self, err := filepath.EvalSymlinks(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sandbox.Plan(sandbox.Spec{Name: "may write the runtime directory", Write: []string{"/dev/null", f.runtime},
		Exec: append(existingPaths([]string{"/lib", "/lib64", "/usr/lib", "/usr/lib64"}), self),
		Env:  []string{"OPROV_TEST_BROKER_IMPOSTOR"}}, sup)
	if err != nil {
		t.Fatal(err)
	}
	args, err := spec.Args(self, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{"OPROV_TEST_BROKER_IMPOSTOR=" + secrets[0]}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	said := bufio.NewReader(out)
	if line, _ := said.ReadString('\n'); line != "listening\n" {
		t.Fatalf("the impostor: %q", line)
	}
	opts := f.opts
	var log strings.Builder
	opts.Log = &log
	if p2, err := startAny(context.Background(), opts); err == nil {
		p2.Stop(context.Background())
	}
	cmd.Process.Kill()
	rest, _ := io.ReadAll(said)
	t.Logf("the impostor says: %s\nthe start says:\n%s", rest, log.String())
	if strings.Contains(string(rest), "got:") {
		t.Errorf("a start took a sandboxed provider for the broker: it says %s", rest)
	}
}
