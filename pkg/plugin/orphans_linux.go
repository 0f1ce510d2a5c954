package plugin

import (
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// AdoptOrphans makes this process the reaper of its descendants' orphans
// (PR_SET_CHILD_SUBREAPER): a process a provider started that left the provider's process group
// (setsid, a double fork) comes back here when its parent ends, instead of going to init, and
// KillOrphans ends it. The far side calls it first: it serves one connection, and nothing it
// started may outlive that.
func AdoptOrphans() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	go reapOrphans()
	return nil
}

// reapOrphans reaps the adopted orphans that end while the connection lasts, which would
// otherwise stay zombies, each holding a process ID, until the far side ends. A child is reaped
// only when it is not a provider this process started (their exec.Cmd waits for them) and has
// stayed a zombie from one look to the next: a wait of this process's own is prompt.
func reapOrphans() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	tick := time.NewTicker(orphanLook)
	defer tick.Stop()
	self := os.Getpid()
	seen := map[int]bool{}
	for {
		select {
		case <-sig:
		case <-tick.C:
		}
		now := map[int]bool{}
		for _, pid := range childrenOfState(self, true) {
			if _, ours := started.Load(pid); ours {
				continue
			}
			if seen[pid] {
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				continue
			}
			now[pid] = true
		}
		seen = now
	}
}

// orphanLook is how often reapOrphans looks for zombies, besides when a child ends.
const orphanLook = time.Second

// KillOrphans kills every child this process still runs (after AdoptOrphans, the orphans of its
// providers' descendants among them), and the children they leave, until none is left or bound
// passes.
func KillOrphans(bound time.Duration) {
	deadline := time.Now().Add(bound)
	self := os.Getpid()
	for {
		left := childrenOfState(self, false)
		if len(left) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childrenOfState lists parent's children (from /proc): the zombies among them, or those still
// running.
func childrenOfState(parent int, zombies bool) []int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := strconv.Itoa(parent)
	var out []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == want && (f[0] == "Z" || f[0] == "X") == zombies {
			out = append(out, pid)
		}
	}
	return out
}
