package plugin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// shareFixture is a command (this test process, standing for tofu) whose starts share a
// connection to the far side this test binary plays (farHost), counting in its file each time
// the connection's command runs. Its broker ends with the test binary.
type shareFixture struct {
	opts    RemoteOptions
	count   string
	runtime string
}

func newShareFixture(t *testing.T) *shareFixture {
	t.Helper()
	f := &shareFixture{count: filepath.Join(t.TempDir(), "connections"), runtime: t.TempDir()}
	t.Setenv("XDG_RUNTIME_DIR", f.runtime)
	t.Setenv("OPROV_TEST_FAR_HOST", "1")
	old := shareParent
	shareParent = os.Getpid
	t.Cleanup(func() { shareParent = old })
	f.opts = shareOptions(f.count)
	return f
}

// shareOptions are a remote's options whose far side is this test binary, counting its
// connections in the file count.
func shareOptions(count string) RemoteOptions {
	exe, _ := os.Executable()
	return RemoteOptions{Name: "shared test", Share: true, HelloTimeout: 10 * time.Second,
		Command: []string{"sh", "-c", `echo start >> "$1"; "$0"; echo end >> "$1"`, exe, count},
		Request: func(string) (*RemoteRequest, error) {
			return &RemoteRequest{Address: "example.com/acme/test", Version: "1.0.0"}, nil
		}}
}

// shareCommand, as a command of its own (OPROV_TEST_SHARE_COMMAND), starts the provider twice
// on a shared connection, calls both, stops both and ends: 0 when all went well.
func shareCommand(count string) int {
	os.Unsetenv("OPROV_TEST_SHARE_COMMAND") // the far side this binary plays is not one
	shareParent = os.Getpid
	ctx := context.Background()
	for range 2 {
		p, err := startAny(ctx, shareOptions(count))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		var resp rawMsg
		if err := p.conn.Invoke(ctx, "/tfplugin6.Provider/GetProviderSchema", &rawMsg{b: []byte("hi")}, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		p.Stop(ctx)
	}
	return 0
}

// secrets are the secret files in the fixture's runtime directory.
func (f *shareFixture) secrets() []string {
	s, _ := filepath.Glob(filepath.Join(f.runtime, "oprov", "remote-*"))
	return s
}

// started takes a provider on the fixture's shared connection, stopped when the test ends, and
// gives the secret of its broker.
func (f *shareFixture) started(t *testing.T) []byte {
	t.Helper()
	p, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	secrets := f.secrets()
	if len(secrets) != 1 {
		t.Fatalf("secrets: %v, want the shared connection's", secrets)
	}
	secret, err := readSecret(secrets[0])
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// waitEnded waits, 10s at most, until the shared connection has ended and its secret is gone.
func (f *shareFixture) waitEnded(t *testing.T, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		secrets := f.secrets()
		if f.lines() == "start end" && len(secrets) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10s after %s: connections %q, secrets left %v", after, f.lines(), secrets)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lines is what the count file says: a "start" per connection, an "end" per one that ended.
func (f *shareFixture) lines() string {
	b, _ := os.ReadFile(f.count)
	return strings.Join(strings.Fields(string(b)), " ")
}

// call makes one call to p through its proxy's path: the far provider echoes it.
func call(t *testing.T, p *Provider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp rawMsg
	if err := p.conn.Invoke(ctx, "/tfplugin6.Provider/GetProviderSchema", &rawMsg{b: []byte("hi")}, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
		t.Fatalf("a call through the shared connection: %v", err)
	}
	if !bytes.HasSuffix(resp.b, echoMarker) {
		t.Fatalf("the call was answered without the provider's echo: %q", resp.b)
	}
}

// Starts of one command share one connection, each with a provider of its own; a provider
// stopped leaves the others working; once the command has ended and its last start stopped, the
// broker ends the connection and removes its secret.
func TestRemoteStartsShareAConnection(t *testing.T) {
	f := newShareFixture(t)
	ctx := context.Background()
	p1, err := startAny(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	call(t, p1)
	p2, err := startAny(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	call(t, p2)
	if got := f.lines(); got != "start" {
		t.Fatalf("two starts ran the connection's command as %q, want one start", got)
	}
	if p1.remote.provider == p2.remote.provider {
		t.Fatalf("two starts got the same far provider %d", p1.remote.provider)
	}
	p1.Stop(ctx)
	call(t, p2)
	secrets := f.secrets()
	if len(secrets) != 1 {
		t.Fatalf("secrets while the command runs: %v, want one", secrets)
	}
	if st, err := os.Stat(secrets[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the secret's mode: %v %v", st, err)
	}
	p2.Stop(ctx)
}

// Once the command has ended and its last start stopped, the broker ends the connection and
// removes its secret.
func TestRemoteBrokerEndsWithTheCommand(t *testing.T) {
	f := newShareFixture(t)
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "OPROV_TEST_SHARE_COMMAND="+f.count)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the command: %v\n%s", err, out)
	}
	f.waitEnded(t, "the command ended")
}

// shareLeave, as a command of its own (OPROV_TEST_SHARE_LEAVE), runs a start (shareHold) that
// takes a provider on the shared connection and keeps it, and ends as soon as it has: a command
// killed outright, its start left behind.
func shareLeave(count string) int {
	os.Unsetenv("OPROV_TEST_SHARE_LEAVE")
	exe, _ := os.Executable()
	hold := exec.Command(exe)
	hold.Env = append(os.Environ(), "OPROV_TEST_SHARE_HOLD="+count)
	out, err := hold.StdoutPipe()
	if err != nil {
		return 3
	}
	hold.Stderr = os.Stderr
	if err := hold.Start(); err != nil {
		return 3
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		return 4
	}
	fmt.Println(hold.Process.Pid)
	return 0
}

// shareHold, as a start (OPROV_TEST_SHARE_HOLD), takes a provider on its command's shared
// connection, says "held", and keeps it for ten minutes.
func shareHold(count string) int {
	os.Unsetenv("OPROV_TEST_SHARE_HOLD")
	if _, err := startAny(context.Background(), shareOptions(count)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fmt.Println("held")
	time.Sleep(10 * time.Minute)
	return 0
}

// A start its command left behind (tofu killed outright, the start still connected) does not
// keep the connection: the broker ends it within its grace after the command ended.
func TestRemoteBrokerDoesNotWaitForAStartLeftBehind(t *testing.T) {
	f := newShareFixture(t)
	t.Setenv("OPROV_TEST_BROKER_GRACE", "500ms")
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "OPROV_TEST_SHARE_LEAVE="+f.count)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the command: %v", err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
		defer syscall.Kill(pid, syscall.SIGKILL)
	}
	f.waitEnded(t, "the command ended (grace 500ms), a start still connected")
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

// A secret left by a broker that is gone is not trusted to be one: the start removes it and
// makes a broker of its own.
func TestRemoteShareReplacesAStaleSecret(t *testing.T) {
	f := newShareFixture(t)
	p, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	secrets := f.secrets()
	p.Stop(context.Background())
	if len(secrets) != 1 {
		t.Fatalf("secrets: %v", secrets)
	}
	stale := make([]byte, 32)
	rand.Read(stale)
	// The broker still runs (its command too); a secret no broker listens for takes its place.
	os.Remove(secrets[0])
	if err := os.WriteFile(secrets[0], []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err = startShared(context.Background(), f.opts)
	if err != nil {
		t.Fatalf("a start after a stale secret: %v", err)
	}
	defer p.Stop(context.Background())
	call(t, p)
	if s, _ := readSecret(secrets[0]); bytes.Equal(s, bytes.Repeat([]byte{0xab}, 32)) {
		t.Error("the stale secret is still there")
	}
}

// The runtime directory and a secret are refused unless they are this user's own and private:
// another user's directory, a link planted in its place, or a secret others may read.
func TestRemoteShareRefusesWhatIsNotPrivate(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", base)
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(base, "oprov")); err != nil {
		t.Fatal(err)
	}
	if _, err := runtimeDir(); err == nil || !strings.Contains(err.Error(), "not a private directory") {
		t.Errorf("a link for the runtime directory: %v", err)
	}
	os.Remove(filepath.Join(base, "oprov"))
	os.Mkdir(filepath.Join(base, "oprov"), 0o755)
	os.Chmod(filepath.Join(base, "oprov"), 0o755)
	if _, err := runtimeDir(); err == nil {
		t.Error("a runtime directory others may enter was taken")
	}
	os.Chmod(filepath.Join(base, "oprov"), 0o700)
	dir, err := runtimeDir()
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "remote-1-x")
	os.WriteFile(secret, []byte(strings.Repeat("ab", 32)), 0o644)
	os.Chmod(secret, 0o644)
	if _, err := readSecret(secret); err == nil {
		t.Error("a secret others may read was taken")
	}
	os.Remove(secret)
	os.WriteFile(filepath.Join(elsewhere, "s"), []byte(strings.Repeat("ab", 32)), 0o600)
	os.Symlink(filepath.Join(elsewhere, "s"), secret)
	if _, err := readSecret(secret); err == nil {
		t.Error("a secret through a link was taken")
	}
}

// Only a process that proves the secret is served, and a process at the socket that cannot
// prove it is not taken for the broker.
func TestRemoteBrokerProvesTheSecret(t *testing.T) {
	f := newShareFixture(t)
	secret := f.started(t)

	// A client without the secret: its proof is wrong, and the broker says nothing more.
	c, err := net.Dial("unix", socketName(secret))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	nonce := make([]byte, 32)
	if _, err := io.ReadFull(c, nonce); err != nil {
		t.Fatal(err)
	}
	wrong := make([]byte, 32)
	rand.Read(wrong)
	c.Write(append(make([]byte, 32), proof(wrong, "client", nonce, make([]byte, 32))...))
	if n, err := c.Read(make([]byte, 64)); err == nil {
		t.Errorf("the broker answered %d bytes to a client without the secret", n)
	}
	c.Close()

	// A process at a socket of the broker's name that cannot prove the secret (one that guessed
	// the name, or bound it after the broker ended).
	other := make([]byte, 32)
	rand.Read(other)
	l, err := net.Listen("unix", socketName(other))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(make([]byte, 32))
		io.ReadFull(c, make([]byte, 64))
		c.Write(make([]byte, 32)) // no proof of the secret
		c.Write([]byte(`{"ok":true}` + "\n"))
		io.Copy(io.Discard, c)
	}()
	if _, err := dialBroker(other, streamHeader{Launch: true}, 5*time.Second); err == nil || !strings.Contains(err.Error(), "could not prove") {
		t.Errorf("an impostor broker was taken: %v", err)
	}
}

// knock, as another user, connects to a broker's socket and says whether the broker sent its
// nonce: 0 refused (nothing came), 1 served.
func knock(name string) int {
	c, err := net.Dial("unix", name)
	if err != nil {
		return 0
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 32)); err != nil {
		return 0
	}
	return 1
}

// A process of another user is refused before anything is said (SO_PEERCRED): an abstract socket
// has no file mode to keep it out.
func TestRemoteBrokerRefusesAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a process as another user")
	}
	f := newShareFixture(t)
	secret := f.started(t)
	// A copy of the test binary that the other user may run.
	self, _ := os.Executable()
	dir, err := os.MkdirTemp("", "knock-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "knock")
	if err := os.Link(self, exe); err != nil { // the same program, which the broker takes
		t.Skipf("no link to the test binary: %v", err)
	}
	os.Chmod(exe, 0o755)
	for _, uid := range []uint32{0, 65534} {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "OPROV_TEST_BROKER_KNOCK="+socketName(secret))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		err := cmd.Run()
		var ee *exec.ExitError
		served := errors.As(err, &ee) && ee.ExitCode() == 1
		if err != nil && !served {
			t.Fatalf("uid %d: %v", uid, err)
		}
		if want := uid == 0; served != want {
			t.Errorf("a process of uid %d was served: %v, want %v", uid, served, want)
		}
	}
}

// A start past the far side's bound on providers at once on one connection (tofu runs an
// instance per provider configuration) makes a connection of its own, and works.
func TestRemoteStartPastTheBoundConnectsOnItsOwn(t *testing.T) {
	f := newShareFixture(t)
	t.Setenv("OPROV_TEST_SESSION_PROVIDERS", "1")
	var log strings.Builder
	f.opts.Log = &log
	p1, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Stop(context.Background())
	p2, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatalf("the start past the bound: %v", err)
	}
	defer p2.Stop(context.Background())
	call(t, p1)
	call(t, p2)
	if got := f.lines(); got != "start start" {
		t.Errorf("connections: %q, want the shared one and one of the second start's own", got)
	}
	if !strings.Contains(log.String(), "already runs 1 providers") || !strings.Contains(log.String(), "connecting on its own") {
		t.Errorf("-v does not say why the start connected on its own:\n%s", log.String())
	}
}

// prove, as a process holding the secret (OPROV_TEST_BROKER_PROVE), says whether the broker
// served it: 1 when it sent its own proof, 0 when it said nothing.
func prove(secretHex string) int {
	secret, _ := hex.DecodeString(secretHex)
	c, err := net.Dial("unix", socketName(secret))
	if err != nil {
		return 0
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	ns := make([]byte, 32)
	if _, err := io.ReadFull(c, ns); err != nil {
		return 0
	}
	nc := make([]byte, 32)
	c.Write(append(nc, proof(secret, "client", ns, nc)...))
	if _, err := io.ReadFull(c, make([]byte, sha256.Size)); err != nil {
		return 0
	}
	return 1
}

// Holding the secret is not enough: the broker serves the command and the starts it ran (this
// oprov, whose parent is the command). A process one of its providers started, or a provider
// (another program) the command ran, is refused.
func TestRemoteBrokerServesOnlyTheCommandsStarts(t *testing.T) {
	f := newShareFixture(t)
	secret := f.started(t)
	self, _ := os.Executable()
	other := filepath.Join(t.TempDir(), "another-program")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		cmd    *exec.Cmd
		served bool
	}{
		{"a start (this oprov, started by the command)", exec.Command(self), true},
		{"a process a provider started", exec.Command("sh", "-c", `"$0"; exit $?`, self), false},
		{"another program the command started", exec.Command(other), false},
	} {
		c.cmd.Env = append(os.Environ(), "OPROV_TEST_BROKER_PROVE="+hex.EncodeToString(secret))
		err := c.cmd.Run()
		var ee *exec.ExitError
		served := errors.As(err, &ee) && ee.ExitCode() == 1
		if err != nil && !served {
			t.Fatalf("%s: %v", c.name, err)
		}
		if served != c.served {
			t.Errorf("%s: served %v, want %v", c.name, served, c.served)
		}
	}
}

// ssh that fails in the broker (exit 255 before the far side ran) may fail for want of the
// terminal the broker lacks (a key's passphrase, a host key question): the start connects on its
// own, where ssh can ask, and works.
func TestRemoteShareSSHFailureConnectsOnItsOwn(t *testing.T) {
	f := newShareFixture(t)
	dir := t.TempDir()
	ssh := filepath.Join(dir, "ssh")
	// The first run fails as ssh does with no terminal to ask on; the next ones reach the far side.
	script := "#!/bin/sh\nif [ ! -e \"$1\" ]; then : > \"$1\"; echo 'Permission denied (publickey).' >&2; exit 255; fi\n" +
		"echo start >> \"$2\"; \"$3\"; echo end >> \"$2\"\n"
	if err := os.WriteFile(ssh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	f.opts.Command = []string{ssh, filepath.Join(dir, "asked"), f.count, exe}
	var log strings.Builder
	f.opts.Log = &log
	p, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatalf("the start after ssh failed in the broker: %v", err)
	}
	defer p.Stop(context.Background())
	call(t, p)
	if p.remote.launch != nil {
		t.Error("the start is on a shared connection, want one of its own")
	}
	if !strings.Contains(log.String(), "ssh failed (exit 255)") || !strings.Contains(log.String(), "connecting on its own") {
		t.Errorf("-v does not say why the start connected on its own:\n%s", log.String())
	}
}
