package tests

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/sandbox"
	"github.com/oprov/oprov/tests/testkit/peers"
)

// sshLogins counts the logins the shared sshd has accepted so far.
func (f *sshFarSide) logins(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(f.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "Accepted publickey")
}

// brokers lists this user's oprov brokers (the hidden __remote-broker command) still running.
func brokers() []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "__remote-broker") {
			out = append(out, d.Name())
		}
	}
	return out
}

// Plain tofu after `oprov init` starts the remote provider several times in one apply (its
// schema, the plan, the apply), each start a process of its own: they share one ssh connection,
// which ends with the command, leaving no broker, no secret and no far process behind.
func TestRemotePlainApplySharesOneConnection(t *testing.T) {
	if !sandbox.Probe().ScopesAbstractSockets() {
		t.Skip("this kernel lacks Landlock's scoping of abstract unix sockets (Linux 6.12): starts do not share a connection there")
	}
	far := farSide(t)
	tofu := peers.Require(t, "tofu")
	f, env := remoteFixture(t, far, remoteBenchConfig(20), "")
	u, err := user.Lookup(remoteUser)
	if err != nil {
		t.Fatal(err)
	}
	runtime := t.TempDir()
	env = append(env, "XDG_RUNTIME_DIR="+runtime, "OPROV="+oprovBin)
	mustOprov(t, append(env, "OPROV_TOFU="+tofu), "init", "-C", f.cfg)

	before := far.logins(t)
	out := mustTofu(t, tofu, f.cfg, env, "apply", "-auto-approve", "-input=false")
	if !strings.Contains(out, "20 added") {
		t.Fatalf("apply did not add 20:\n%s", out)
	}
	if n := far.logins(t) - before; n != 1 {
		t.Errorf("one plain apply logged in %d times over ssh, want 1 (one connection shared by every start)", n)
	}
	// tofu has ended: the broker ends too, and with its connection the far side.
	deadline := time.Now().Add(15 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(runtime, "oprov", "remote-*"))
		b, p := brokers(), processesOf(u.Uid)
		if len(left) == 0 && len(b) == 0 && len(p) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15s after tofu ended: secrets %v, brokers %v, far processes %v", left, b, p)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The next command makes a connection of its own.
	before = far.logins(t)
	out = mustTofu(t, tofu, f.cfg, env, "plan", "-input=false")
	if !strings.Contains(out, "No changes") {
		t.Errorf("plan after apply:\n%s", out)
	}
	if n := far.logins(t) - before; n != 1 {
		t.Errorf("the plan logged in %d times, want 1", n)
	}
}
