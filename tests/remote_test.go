package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// remoteUser is the far side's account: a user of the tests' own, reached only by key.
const remoteUser = "oprov-remote-test"

// sshFarSide is a real OpenSSH server on 127.0.0.1 with a throwaway host key, letting remoteUser
// in with one key; the far side's oprov is a copy in that user's home.
type sshFarSide struct {
	home, key, knownHosts, oprov string
	port                         int
	cmd                          *exec.Cmd
	log                          *os.File
	dir                          string
}

// stopSSHD ends the shared sshd, if a test started it (TestMain, after every test).
func stopSSHD() {
	if sshSide != nil {
		sshSide.cmd.Process.Kill()
		sshSide.cmd.Wait()
		sshSide.log.Close()
		os.RemoveAll(sshSide.dir)
	}
}

var (
	sshOnce sync.Once
	sshSide *sshFarSide
	sshErr  error
)

// farSide starts sshd once per test run (shared by every remote test) and gives it.
func farSide(t testing.TB) *sshFarSide {
	t.Helper()
	sshd := peers.Require(t, "sshd")
	peers.Require(t, "ssh")
	if os.Geteuid() != 0 {
		peers.Missing(t, "root, to make the far side's user "+remoteUser)
	}
	sshOnce.Do(func() { sshSide, sshErr = startSSHD(sshd) })
	if sshErr != nil {
		t.Fatal(sshErr)
	}
	return sshSide
}

func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func startSSHD(sshd string) (*sshFarSide, error) {
	if _, err := user.Lookup(remoteUser); err != nil {
		if err := runCmd("useradd", "--create-home", "--shell", "/bin/sh", remoteUser); err != nil {
			return nil, err
		}
	}
	// No password at all ("*", not the locked "!"): sshd without PAM lets a key in only then.
	if err := runCmd("usermod", "-p", "*", remoteUser); err != nil {
		return nil, err
	}
	u, err := user.Lookup(remoteUser)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "oprov-sshd-")
	if err != nil {
		return nil, err
	}
	f := &sshFarSide{home: u.HomeDir, key: filepath.Join(dir, "id"), knownHosts: filepath.Join(dir, "known_hosts")}
	hostKey := filepath.Join(dir, "host_key")
	for _, k := range []string{f.key, hostKey} {
		if err := runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k); err != nil {
			return nil, err
		}
	}
	pub, err := os.ReadFile(f.key + ".pub")
	if err != nil {
		return nil, err
	}
	// The far side's files: its key, its oprov, and the secret only it may read.
	f.oprov = filepath.Join(f.home, "bin", "oprov")
	bin, err := os.ReadFile(oprovBin)
	if err != nil {
		return nil, err
	}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{filepath.Join(f.home, ".ssh", "authorized_keys"), pub, 0o600},
		{f.oprov, bin, 0o755},
		{filepath.Join(f.home, "greeting"), []byte("Howdy\n"), 0o600},
	} {
		if err := os.MkdirAll(filepath.Dir(w.path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(w.path, w.data, w.mode); err != nil {
			return nil, err
		}
	}
	if err := runCmd("chown", "-R", remoteUser+":", f.home); err != nil {
		return nil, err
	}
	if err := os.Chmod(f.home, 0o700); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AllowUsers %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
`, f.port, hostKey, filepath.Join(dir, "sshd.pid"), remoteUser)), 0o600); err != nil {
		return nil, err
	}
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(string(hostPub))
	if err := os.WriteFile(f.knownHosts, []byte(fmt.Sprintf("[127.0.0.1]:%d %s %s\n", f.port, fields[0], fields[1])), 0o600); err != nil {
		return nil, err
	}
	os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	f.cmd = exec.Command(sshd, "-D", "-e", "-f", cfg)
	if f.log, err = os.Create(filepath.Join(dir, "sshd.log")); err != nil {
		return nil, err
	}
	f.cmd.Stderr = f.log
	f.dir = dir
	if err := f.cmd.Start(); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", f.port))
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			return nil, fmt.Errorf("sshd did not listen on port %d", f.port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f, nil
}

// command is the remote block's command: ssh to the far user, running its oprov.
func (f *sshFarSide) command(hostArgs ...string) []string {
	return append([]string{"ssh", "-T", "-i", f.key, "-p", strconv.Itoa(f.port),
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + f.knownHosts,
		remoteUser + "@127.0.0.1", f.oprov, "provider", "host", "--stdio"}, hostArgs...)
}

// remoteBlock is oprov.hcl's remote block for hello.
func (f *sshFarSide) remoteBlock(hostArgs ...string) string {
	var quoted []string
	for _, a := range f.command(hostArgs...) {
		quoted = append(quoted, strconv.Quote(a))
	}
	return "remote \"example.com/acme/hello\" {\n  command = [" + strings.Join(quoted, ", ") + "]\n}\n"
}

// remoteHelloConfig greets with the word in the file "greeting" in the provider's working
// directory: the far user's home, which only that user can read, over there; nothing here.
const remoteHelloConfig = `terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = "~> 1.0"
    }
  }
}

provider "hello" {
  greeting_file = "greeting"
}

resource "hello_greeting" "world" {
  name = "remote"
}

output "message" { value = hello_greeting.world.message }
`

// TestRemoteOverSSH: the Go provider from OCI runs as the far user through a real sshd, for
// tofu and terraform: with the remote block, apply reads the far user's file; without it, the
// same configuration fails on that read here.
func TestRemoteOverSSH(t *testing.T) {
	far := farSide(t)
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			f := newLoaderFixture(t, remoteHelloConfig)
			local, err := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
			if err != nil {
				t.Fatal(err)
			}
			env := append(f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
			mustOprov(t, env, "lock", "-C", f.cfg)

			r := oprov(t, env, "run", "-C", f.cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "Cannot read the greeting file") {
				t.Fatalf("without the remote block, apply should fail on the read here: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}

			writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+far.remoteBlock())
			start := time.Now()
			r = mustOprov(t, env, "run", "-v", "-C", f.cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			t.Logf("remote apply took %s", time.Since(start))
			if !strings.Contains(r.Stdout, "Howdy, remote!") {
				t.Errorf("the far side's greeting is not in the output:\n%s", r.Stdout)
			}
			if !strings.Contains(r.Stderr, `on remote "example.com/acme/hello" (ssh)`) {
				t.Errorf("-v does not say where the provider runs:\n%s", r.Stderr)
			}
			if !strings.Contains(r.Stderr, "under whatever sandbox the far side's operator sets") {
				t.Errorf("-v does not say that the far side decides the sandbox:\n%s", r.Stderr)
			}

			// After oprov init, plain tofu (or terraform) runs the launcher tofu installed, which
			// hands over to oprov and the far side.
			mustOprov(t, append(env, "OPROV_TOFU="+bin), "init", "-C", f.cfg)
			writeFile(t, filepath.Join(f.cfg, "main.tf"), strings.Replace(remoteHelloConfig, `name = "remote"`, `name = "plain"`, 1))
			out := mustTofu(t, bin, f.cfg, append(env, "OPROV="+oprovBin), "apply", "-auto-approve", "-input=false")
			if !strings.Contains(out, "Howdy, plain!") {
				t.Errorf("plain %s apply after oprov init did not run the provider on the far side:\n%s", tool, out)
			}
		})
	}
}

// remoteFixture is the hello configuration, locked, with the remote block for the far side.
func remoteFixture(t *testing.T, far *sshFarSide, tf, extraHCL string) (*loaderFixture, []string) {
	t.Helper()
	f := newLoaderFixture(t, tf)
	local, err := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+far.remoteBlock()+extraHCL)
	env := append(f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	mustOprov(t, env, "lock", "-C", f.cfg)
	return f, env
}

// The near side's audit records remote calls (and where the provider runs), and its deny rule
// stops a remote create before the far side sees it.
func TestRemoteAuditAndRules(t *testing.T) {
	far := farSide(t)
	tofu := peers.Require(t, "tofu")
	deny := `audit {
  path = "audit.jsonl"
}
rule "no-remote-greetings" {
  deny    = "resource.type == 'hello_greeting' && action == 'create' && planned.name == 'denied'"
  message = "not this one"
}
`
	f, env := remoteFixture(t, far, remoteHelloConfig, deny)
	mustOprov(t, env, "run", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	data, err := os.ReadFile(filepath.Join(f.cfg, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	audit := string(data)
	for _, want := range []string{`"rpc":"Launch"`, `"remote":"remote \"example.com/acme/hello\" (ssh)"`, `"rpc":"ApplyResourceChange"`} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit lacks %s:\n%s", want, audit)
		}
	}
	writeFile(t, filepath.Join(f.cfg, "denied.tf"), "resource \"hello_greeting\" \"denied\" {\n  name = \"denied\"\n}\n")
	r := oprov(t, env, "run", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "not this one") {
		t.Errorf("the deny rule did not stop the remote create: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// processesOf lists the processes whose real user is uid, as "PID NAME".
func processesOf(uid string) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil {
			continue
		}
		var name string
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Name:"); ok {
				name = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "Uid:"); ok && strings.Fields(v)[0] == uid {
				out = append(out, d.Name()+" "+name)
			}
		}
	}
	return out
}

// sshChild finds the ssh process a remote block started for this test, by its known_hosts file.
func sshChild(knownHosts string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmdline), "ssh\x00") && strings.Contains(string(cmdline), knownHosts) {
			return pid
		}
	}
	return 0
}

// Killing ssh in the middle of an apply of 50 resources ends the apply within a bound with an
// error naming the remote and the cause; nothing of the far user's is left running; the state
// holds what was applied, and the next apply completes it.
func TestRemoteConnectionLost(t *testing.T) {
	far := farSide(t)
	tofu := peers.Require(t, "tofu")
	u, err := user.Lookup(remoteUser)
	if err != nil {
		t.Fatal(err)
	}
	tf := strings.Replace(remoteHelloConfig, `resource "hello_greeting" "world" {
  name = "remote"
}`, `resource "hello_greeting" "many" {
  count = 50
  name  = "n${count.index}"
  delay = "400ms"
}`, 1)
	tf = strings.Replace(tf, `output "message" { value = hello_greeting.world.message }`, "", 1)
	f, env := remoteFixture(t, far, tf, "")
	cmd := exec.Command(oprovBin, "run", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait for the apply to be under way, then cut the connection.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "Creation complete") {
		if time.Now().After(deadline) {
			t.Fatalf("the apply never got under way:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid := sshChild(far.knownHosts)
	if pid == 0 {
		t.Fatal("no ssh process found for the remote block")
	}
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
	killed := time.Now()
	select {
	case err := <-done:
		t.Logf("oprov run ended %s after ssh was killed: %v", time.Since(killed), err)
		if err == nil {
			t.Fatalf("the apply succeeded without its connection:\n%s", out.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("oprov run did not end within 30s of losing its connection:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `remote "example.com/acme/hello" (ssh): the connection ended`) {
		t.Errorf("the error does not name the remote and the cause:\n%s", out.String())
	}
	var left []string
	for i := 0; i < 100; i++ {
		if left = processesOf(u.Uid); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("the far user still runs %v after the connection ended", left)
	}
	state := mustOprov(t, env, "run", "-C", f.cfg, "--", tofu, "state", "list").Stdout
	n := strings.Count(state, "hello_greeting.many[")
	if n == 0 || n == 50 {
		t.Errorf("the state holds %d of 50 resources; want what was applied before the cut:\n%s", n, state)
	}
	mustOprov(t, env, "run", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if state := mustOprov(t, env, "run", "-C", f.cfg, "--", tofu, "state", "list").Stdout; strings.Count(state, "hello_greeting.many[") != 50 {
		t.Errorf("the next apply did not complete the 50 resources:\n%s", state)
	}
}

// syncBuffer is a buffer two writers and a reader share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A packaged stdio provider (Python) from OCI runs on the far side, as the far user, through a
// real sshd: its database is in the far user's private directory; without the remote block the
// same configuration fails on it here (run before that directory exists: the near side is root
// in this test, which could otherwise write there).
func TestRemoteStdioOverSSH(t *testing.T) {
	far := farSide(t)
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			cfg, _, env := stdioPackaged(t, "stdio-python")
			if err := runCmd("su", "-s", "/bin/sh", "-c", "cd && rm -rf private", remoteUser); err != nil {
				t.Fatal(err)
			}
			tf := strings.Replace(fmt.Sprintf(kvPackagedConfig, filepath.Join(far.home, "private", "kv.json")), `output "fn" { value = provider::kv::entry_id("p") }`, "", 1)
			writeFile(t, filepath.Join(cfg, "main.tf"), tf)
			mustOprov(t, env, "lock", "-C", cfg)
			r := oprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			if r.Code == 0 {
				t.Fatalf("without the remote block, apply should fail on the database here:\n%s%s", r.Stdout, r.Stderr)
			}
			if err := runCmd("su", "-s", "/bin/sh", "-c", "cd && mkdir -m 0700 private", remoteUser); err != nil {
				t.Fatal(err)
			}
			local, _ := os.ReadFile(filepath.Join(cfg, "oprov.hcl"))
			writeFile(t, filepath.Join(cfg, "oprov.hcl"), string(local)+strings.Replace(far.remoteBlock(), "example.com/acme/hello", "example.com/acme/kv", 1))
			r = mustOprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			expectIn(t, "remote stdio apply", r.Stdout, `id = "kv:a"`)
			data, err := os.ReadFile(filepath.Join(far.home, "private", "kv.json"))
			if err != nil || !strings.Contains(string(data), "packaged") {
				t.Errorf("the far user's database: %q, %v", data, err)
			}
		})
	}
}

// The packaged Python provider (pyhello, the tf SDK) from OCI runs on the far side, as the far
// user with the far side's CPython, through a real sshd.
func TestRemotePythonOverSSH(t *testing.T) {
	far := farSide(t)
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			f := pyFixture(t)
			env := append(f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
			mustOprov(t, env, "lock", "-C", f.cfg)
			local, _ := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
			writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+strings.Replace(far.remoteBlock(), "example.com/acme/hello", "example.com/acme/pyhello", 1))
			r := mustOprov(t, env, "run", "-v", "-C", f.cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			expectIn(t, "remote python apply", r.Stdout, `message = "Hello, oprov!"`)
			expectIn(t, "remote python apply", r.Stderr, `on remote "example.com/acme/pyhello" (ssh)`)
			found, _ := filepath.Glob(filepath.Join(far.home, ".cache", "oprov", "mirror", "*", "example.com", "acme", "pyhello"))
			if len(found) == 0 {
				t.Errorf("pyhello was not unpacked in the far user's cache")
			}
		})
	}
}

// The far side's refusals reach the user as errors naming the remote and the cause, with the far
// side's last stderr lines. A far side that requires a sandbox runs a request without a sandbox
// block under the default sandbox, accepts a block that narrows it, and refuses one that asks for
// more (a path, best_effort), naming its own setting. A far side without oprov, and a remote
// block whose label selects no provider (a typo), are errors too.
func TestRemoteRefusals(t *testing.T) {
	far := farSide(t)
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, strings.Replace(remoteHelloConfig, `greeting_file = "greeting"`, "", 1))
	local, err := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	env := append(f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	mustOprov(t, env, "lock", "-C", f.cfg)
	apply := func(hcl string) result {
		writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+hcl)
		return oprov(t, env, "run", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	}

	r := apply(far.remoteBlock("--require-sandbox"))
	if r.Code != 0 || !strings.Contains(r.Stdout, "Hello, remote!") {
		t.Errorf("a request without a sandbox to a far side that requires one (the default sandbox): exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = apply(far.remoteBlock("--require-sandbox") + "sandbox \"*\" {\n  read = [\"/\"]\n  env = [\"AWS_*\"]\n}\n")
	if r.Code == 0 || !strings.Contains(r.Stderr, `remote "example.com/acme/hello" (ssh)`) || !strings.Contains(r.Stderr, "--require-sandbox") || !strings.Contains(r.Stderr, "beyond the far side's sandbox") {
		t.Errorf("a request for read = [\"/\"] to a far side that requires the default sandbox: exit %d\n%s", r.Code, r.Stderr)
	}
	r = apply(strings.Replace(far.remoteBlock(), "example.com/acme/hello", "example.com/acme/helo", 1))
	if r.Code == 0 || !strings.Contains(r.Stderr, `remote "example.com/acme/helo" selects no provider`) {
		t.Errorf("a typo in a remote block's label: exit %d\n%s", r.Code, r.Stderr)
	}
	r = apply(far.remoteBlock("--require-sandbox") + "sandbox \"*\" {}\n")
	if r.Code != 0 || !strings.Contains(r.Stdout, "Hello, remote!") {
		t.Errorf("a sandboxed request to a far side that requires one: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// best_effort would let the far side run it with less of a sandbox: the requirement refuses it.
	r = apply(far.remoteBlock("--require-sandbox") + "sandbox \"*\" {\n  best_effort = true\n}\n")
	if r.Code == 0 || !strings.Contains(r.Stderr, "best_effort") {
		t.Errorf("a best_effort sandbox to a far side that requires one: exit %d\n%s", r.Code, r.Stderr)
	}

	r = apply(strings.Replace(far.remoteBlock(), strconv.Quote(far.oprov), strconv.Quote("/nonexistent/oprov"), 1))
	if r.Code == 0 || !strings.Contains(r.Stderr, "ended before it said hello") || !strings.Contains(r.Stderr, "/nonexistent/oprov") {
		t.Errorf("a far side without oprov: exit %d\n%s", r.Code, r.Stderr)
	}
}

// Ctrl-C (SIGINT to oprov run) in the middle of a remote apply: tofu stops the provider's work,
// oprov ends the connection, and nothing of the far user's is left running.
func TestRemoteInterrupt(t *testing.T) {
	far := farSide(t)
	tofu := peers.Require(t, "tofu")
	u, err := user.Lookup(remoteUser)
	if err != nil {
		t.Fatal(err)
	}
	tf := strings.Replace(remoteHelloConfig, `name = "remote"`, "name  = \"slow\"\n  delay = \"60s\"", 1)
	f, env := remoteFixture(t, far, tf, "")
	cmd := exec.Command(oprovBin, "run", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "Creating...") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the apply never got under way:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("oprov run did not end within 30s of Ctrl-C:\n%s", out.String())
	}
	var left []string
	for i := 0; i < 100; i++ {
		if left = processesOf(u.Uid); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("the far user still runs %v after Ctrl-C", left)
	}
}

// ssh's own failures against the real sshd, a wrong port and a host key the pinned known_hosts
// does not hold, are reported as ssh's (exit 255) with ssh's words, not as a far side without
// oprov; -v says where oprov was connecting. A far side that never says hello ends at the remote
// block's hello_timeout, naming it.
func TestRemoteSSHFaults(t *testing.T) {
	far := farSide(t)
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, strings.Replace(remoteHelloConfig, `greeting_file = "greeting"`, "", 1))
	local, err := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	env := append(f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	mustOprov(t, env, "lock", "-C", f.cfg)
	apply := func(block string) result {
		writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+block)
		return oprov(t, env, "run", "-v", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	}
	block := far.remoteBlock()

	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	r := apply(strings.Replace(block, strconv.Quote(strconv.Itoa(far.port)), strconv.Quote(closed), 1))
	for _, w := range []string{"ssh failed (exit 255)", "ssh's stderr ended with", "Connection refused", "connecting to " + remoteUser + "@127.0.0.1 through ssh"} {
		if r.Code == 0 || !strings.Contains(r.Stderr, w) {
			t.Errorf("a closed port: exit %d, stderr lacks %q:\n%s", r.Code, w, r.Stderr)
		}
	}
	if strings.Contains(r.Stderr, "is oprov installed") {
		t.Errorf("ssh's failure is blamed on the far side:\n%s", r.Stderr)
	}

	// A known_hosts that holds no key for the host.
	empty := filepath.Join(t.TempDir(), "known_hosts")
	writeFile(t, empty, "")
	r = apply(strings.Replace(block, strconv.Quote("UserKnownHostsFile="+far.knownHosts), strconv.Quote("UserKnownHostsFile="+empty), 1))
	if r.Code == 0 || !strings.Contains(r.Stderr, "ssh failed (exit 255)") || !strings.Contains(r.Stderr, "Host key verification failed") {
		t.Errorf("an unknown host key: exit %d\n%s", r.Code, r.Stderr)
	}

	// A far command that never says hello, under a short hello_timeout.
	silent := strings.Replace(block, strconv.Quote(far.oprov)+", \"provider\", \"host\", \"--stdio\"", `"head", "-c1"`, 1) // ends when ssh does
	silent = strings.Replace(silent, "]\n}", "]\n  hello_timeout = \"2s\"\n}", 1)
	r = apply(silent)
	if r.Code == 0 || !strings.Contains(r.Stderr, "said no hello within 2s") || !strings.Contains(r.Stderr, "hello_timeout in the remote block at") {
		t.Errorf("a far side that never says hello: exit %d\n%s", r.Code, r.Stderr)
	}
}
