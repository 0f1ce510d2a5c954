package tests

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// farEndBound is docs/remote.md's bound ("When something fails"): a far side whose connection
// ended (its input closed, its output gone, or both at once) ends, with its provider's whole
// process group, within it.
const farEndBound = 5 * time.Second

// farSilentBound is docs/remote.md's bound for a near side gone silent, nothing closed: the far
// side's keepalive gives it up within 40 seconds; it then ends within farEndBound.
const farSilentBound = 45 * time.Second

// TestRemoteFarSideEndsWithItsConnection runs the real far side (oprov provider host --stdio)
// behind pipefault, which stands where ssh does, starts a remote apply whose resource takes a
// minute (a call in flight), then ends the connection in each way one ends: the far side's input
// closes with its output still read (half-open), its output is no longer read with its input
// still open (the other half), both close at once (the near process killed -9), nothing passes
// and nothing closes (a network dropped; the bound is the keepalive's). The near oprov
// run killed -9 is run too, with the far side its direct child, and through a real sshd. Each
// time the far process ends within farEndBound, its provider's process group is gone, and the
// far process spent little CPU after the connection ended (measured from /proc, not the clock: a
// read loop spinning on EOF would spend a core).
func TestRemoteFarSideEndsWithItsConnection(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	relay := filepath.Join(t.TempDir(), "pipefault")
	build := exec.Command("go", "build", "-o", relay, "./tests/testkit/pipefault")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building pipefault: %v\n%s", err, out)
	}
	tf := strings.Replace(remoteHelloConfig, `name = "remote"`, "name  = \"slow\"\n  delay = \"60s\"", 1)
	tf = strings.Replace(tf, `greeting_file = "greeting"`, "", 1)
	f := newLoaderFixture(t, tf)
	local, err := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	env := append(f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	mustOprov(t, env, "lock", "-C", f.cfg)
	block := func(command ...string) string {
		var quoted []string
		for _, a := range command {
			quoted = append(quoted, strconv.Quote(a))
		}
		return "remote \"example.com/acme/hello\" {\n  command = [" + strings.Join(quoted, ", ") + "]\n}\n"
	}
	far := []string{oprovBin, "provider", "host", "--stdio"}

	for _, mode := range []string{"input", "output", "kill", "silent"} {
		t.Run("pipefault "+mode, func(t *testing.T) {
			bound := farEndBound
			if mode == "silent" {
				// Nothing ends: the far side learns it from its keepalive (docs/remote.md).
				bound = farSilentBound
			}
			pidFile := filepath.Join(t.TempDir(), "far.pid")
			writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+block(append([]string{relay, mode, pidFile}, far...)...))
			near := startSlowApply(t, f.cfg, env, tofu)
			farPid := readPid(t, pidFile)
			relayPid := parentOf(farPid)
			groups := providerGroups(t, farPid)
			syscall.Kill(relayPid, syscall.SIGUSR1)
			checkFarEnds(t, farPid, groups, mode, bound)
			near.stop()
		})
	}

	t.Run("near killed -9", func(t *testing.T) {
		writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+block(far...))
		near := startSlowApply(t, f.cfg, env, tofu)
		farPid := childNamed(near.cmd.Process.Pid, "oprov")
		if farPid == 0 {
			t.Fatal("no far side found among oprov run's children")
		}
		groups := providerGroups(t, farPid)
		near.cmd.Process.Kill()
		checkFarEnds(t, farPid, groups, "near killed -9", farEndBound)
		near.stop()
	})

	t.Run("near killed -9, through sshd", func(t *testing.T) {
		ssh := farSide(t)
		u, err := user.Lookup(remoteUser)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+ssh.remoteBlock())
		near := startSlowApply(t, f.cfg, env, tofu)
		var farPid int
		for _, p := range processesOf(u.Uid) {
			if pid, name, _ := strings.Cut(p, " "); name == "oprov" {
				farPid, _ = strconv.Atoi(pid)
			}
		}
		if farPid == 0 {
			t.Fatalf("no far side found among %s's processes: %v", remoteUser, processesOf(u.Uid))
		}
		groups := providerGroups(t, farPid)
		near.cmd.Process.Kill()
		checkFarEnds(t, farPid, groups, "near killed -9 through sshd", farEndBound)
		near.stop()
	})
}

// slowApply is an oprov run whose apply is under way, in a process group of its own.
type slowApply struct {
	cmd *exec.Cmd
	out *syncBuffer
}

// startSlowApply starts oprov run's apply and waits until its slow create is in flight.
func startSlowApply(t *testing.T, cfg string, env []string, tofu string) *slowApply {
	t.Helper()
	cmd := exec.Command(oprovBin, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a := &slowApply{cmd: cmd, out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = a.out, a.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.stop)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(a.out.String(), "Creating...") {
		if time.Now().After(deadline) {
			t.Fatalf("the apply never got under way:\n%s", a.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the create has reached the far side's provider
	return a
}

// stop ends what is left of the near side (oprov run and tofu: its process group).
func (a *slowApply) stop() {
	if a.cmd.Process != nil {
		syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		a.cmd.Wait()
	}
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s was never written", file)
	return 0
}

// procStat is what /proc/PID/stat says of a process: its state, parent, process group and the
// CPU time it has spent (user and system).
type procStat struct {
	state      string
	ppid, pgrp int
	cpu        time.Duration
}

// readStat reads /proc/PID/stat; ok is false when the process is gone.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
	// stime ...: comm may hold spaces and parentheses, so read after the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(fields[1])
	pgrp, _ := strconv.Atoi(fields[2])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	// The kernel counts in USER_HZ ticks, 100 a second on every Linux architecture Go targets.
	return procStat{state: fields[0], ppid: ppid, pgrp: pgrp, cpu: time.Duration(utime+stime) * 10 * time.Millisecond}, true
}

func parentOf(pid int) int {
	st, _ := readStat(pid)
	return st.ppid
}

// childNamed finds a child of parent whose command is name.
func childNamed(parent int, name string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if st, ok := readStat(pid); ok && st.ppid == parent && strings.TrimSpace(string(comm)) == name {
			return pid
		}
	}
	return 0
}

// providerGroups gives the process groups of far's descendants (its provider, and what that
// started), other than far's own; there must be one.
func providerGroups(t *testing.T, far int) map[int]bool {
	t.Helper()
	farStat, ok := readStat(far)
	if !ok {
		t.Fatalf("the far side (pid %d) is not running", far)
	}
	groups := map[int]bool{}
	for _, pid := range descendants(far) {
		if st, ok := readStat(pid); ok && st.pgrp != farStat.pgrp {
			groups[st.pgrp] = true
		}
	}
	if len(groups) == 0 {
		t.Fatalf("the far side (pid %d) runs no provider", far)
	}
	return groups
}

// descendants lists pid's descendants (from /proc).
func descendants(pid int) []int {
	children := map[int][]int{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(p); ok {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	var out []int
	next := children[pid]
	for len(next) > 0 {
		p := next[0]
		next = append(next[1:], children[p]...)
		out = append(out, p)
	}
	return out
}

// inGroups lists the live processes (not zombies) of the given process groups.
func inGroups(groups map[int]bool) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && groups[st.pgrp] && st.state != "Z" {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			out = append(out, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(comm))))
		}
	}
	return out
}

// checkFarEnds watches the far process from the moment its connection ended: it must end within
// farEndBound, spending little CPU, and leave nothing of its provider's process groups running.
func checkFarEnds(t *testing.T, far int, groups map[int]bool, how string, bound time.Duration) {
	t.Helper()
	ended := time.Now()
	first, ok := readStat(far)
	if !ok {
		t.Fatalf("the far side was gone before its connection ended (%s)", how)
	}
	last := first
	for {
		st, ok := readStat(far)
		if !ok || st.state == "Z" {
			if ok {
				last = st // a zombie still says what it spent
			}
			break
		}
		last = st
		if time.Since(ended) > 3*bound {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	lived := time.Since(ended)
	spent := last.cpu - first.cpu
	t.Logf("%s: the far side ended %s after its connection, spending %s of CPU", how, lived.Round(time.Millisecond), spent)
	if lived > bound {
		t.Errorf("the far side (pid %d) still ran %s after its connection ended (%s); the bound is %s", far, lived.Round(time.Millisecond), how, bound)
	}
	// Stopping the provider takes a little CPU; spinning on a closed stream takes a core. The
	// kernel counts CPU in 10 ms ticks, so a far side that ended within a second (20 ms of CPU in
	// 21 ms, once in CI) shows no spin by its share of that time: only past a second does it.
	if spent > 500*time.Millisecond || (lived > time.Second && spent > lived/2) {
		t.Errorf("the far side spent %s of CPU in the %s after its connection ended (%s): it spins", spent, lived.Round(time.Millisecond), how)
	}
	var left []string
	for time.Since(ended) < bound+time.Second {
		if left = inGroups(groups); len(left) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("the provider's process group still runs %v after the connection ended (%s)", left, how)
	}
}
