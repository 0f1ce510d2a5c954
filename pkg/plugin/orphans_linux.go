package plugin

import (
	"os"
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
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// KillOrphans kills every child this process still runs (after AdoptOrphans, the orphans of its
// providers' descendants among them), and the children they leave, until none is left or bound
// passes.
func KillOrphans(bound time.Duration) {
	deadline := time.Now().Add(bound)
	self := os.Getpid()
	for {
		left := liveChildren(self)
		if len(left) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liveChildren lists parent's children that have not ended (from /proc).
func liveChildren(parent int) []int {
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
		if len(f) > 1 && f[1] == want && f[0] != "Z" && f[0] != "X" {
			out = append(out, pid)
		}
	}
	return out
}
