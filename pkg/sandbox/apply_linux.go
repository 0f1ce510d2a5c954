package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"syscall"

	seccomp "github.com/elastic/go-seccomp-bpf"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Access rights, as Landlock names them, that oprov grants.
const (
	rightsRead  = ll.AccessFSReadFile | ll.AccessFSReadDir
	rightsExec  = ll.AccessFSExecute | rightsRead
	rightsFile  = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	rightsABI1  = (1 << 13) - 1
	rightsWrite = uint64(1<<17 - 1)
)

// handledFS is every file system right the given ABI knows.
func handledFS(abi int) uint64 {
	h := uint64(rightsABI1)
	if abi >= 2 {
		h |= ll.AccessFSRefer
	}
	if abi >= 3 {
		h |= ll.AccessFSTruncate
	}
	if abi >= 5 {
		h |= ll.AccessFSIoctlDev
	}
	return h
}

// apply confines the calling thread, which execProvider then replaces by the provider: the
// thread stays locked, since no_new_privs, the Landlock domain and the seccomp filter belong to
// the thread that calls execve.
func apply(s Spec) error {
	runtime.LockOSThread()
	if err := detachTerminal(); err != nil {
		return err
	}
	if err := setLimits(s.Limits); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if s.ABI > 0 {
		if err := restrict(s); err != nil {
			return err
		}
	} else if !s.BestEffort {
		return errors.New("no Landlock ABI was planned and best_effort is not set: refusing to start the provider unconfined")
	}
	if s.Seccomp {
		if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: filterPolicy()}); err != nil {
			return fmt.Errorf("seccomp filter: %w", err)
		}
		if err := loadNativeFilter(); err != nil {
			return err
		}
	} else if !s.BestEffort {
		return errors.New("no seccomp filter was planned and best_effort is not set: refusing to start the provider")
	}
	return nil
}

// detachTerminal keeps the provider away from the user's terminal: it starts a session of its
// own (no controlling terminal, so nothing it does reaches the terminal's job control or input)
// and takes /dev/null as stdin, in place of whatever it inherited (go-plugin hands a plugin
// oprov's stdin; the handshake is on stdout and the calls on a socket, so a provider needs none).
// The seccomp filter refuses TIOCSTI and TIOCLINUX on any terminal a descriptor still reaches.
func detachTerminal() error {
	if _, err := unix.Setsid(); err != nil {
		if sid, _ := unix.Getsid(0); sid != unix.Getpid() {
			return fmt.Errorf("starting a session of its own, away from the user's terminal: %w (the exec step must not be a process group leader: start it with setsid instead of setpgid)", err)
		}
	}
	null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/null as the provider's stdin: %w", err)
	}
	defer unix.Close(null)
	if err := unix.Dup3(null, 0, 0); err != nil {
		return fmt.Errorf("giving the provider /dev/null as stdin: %w", err)
	}
	return nil
}

// setLimits sets the resource limits that are given (soft and hard alike).
func setLimits(l Limits) error {
	for _, r := range []struct {
		res  int
		v    uint64
		name string
	}{{unix.RLIMIT_AS, l.Memory, "memory"}, {unix.RLIMIT_NPROC, l.Processes, "processes"}, {unix.RLIMIT_NOFILE, l.OpenFiles, "open_files"}, {unix.RLIMIT_CPU, l.CPUSeconds, "cpu_time"}} {
		if r.v == 0 {
			continue
		}
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: r.v, Max: r.v}); err != nil {
			return fmt.Errorf("limit %s = %d: %w", r.name, r.v, err)
		}
	}
	return nil
}

// restrict builds the Landlock ruleset of s and enforces it on the calling thread.
func restrict(s Spec) error {
	if abi, err := ll.LandlockGetABIVersion(); err != nil || abi < s.ABI {
		return fmt.Errorf("the kernel does not offer Landlock ABI %d (%v): refusing to start the provider with less than planned", s.ABI, err)
	}
	attr := ll.RulesetAttr{HandledAccessFS: handledFS(s.ABI)}
	if s.ABI >= abiNet {
		attr.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	}
	if s.ABI >= abiScope {
		attr.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	fd, err := ll.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	defer unix.Close(fd)
	for _, g := range []struct {
		paths  []string
		rights uint64
	}{{s.Read, rightsRead}, {s.Exec, rightsExec}, {s.Write, rightsWrite}} {
		for _, p := range g.paths {
			if err := addPath(fd, p, g.rights&attr.HandledAccessFS, slices.Contains(s.NoLinks, p)); err != nil {
				return fmt.Errorf("landlock rule for %s: %w", p, err)
			}
		}
	}
	if s.ABI >= abiNet {
		for _, port := range s.Connect {
			if err := ll.LandlockAddNetPortRule(fd, &ll.NetPortAttr{AllowedAccess: ll.AccessNetConnectTCP, Port: uint64(port)}, 0); err != nil {
				return fmt.Errorf("landlock rule for TCP port %d: %w", port, err)
			}
		}
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// addPath allows rights below path (only the rights a file has, when it is not a directory);
// noLinks opens path without following any link in it.
func addPath(fd int, path string, rights uint64, noLinks bool) error {
	pfd, err := openRulePath(path, noLinks)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= rightsFile
	}
	return ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: rights, ParentFd: pfd}, 0)
}

// openRulePath opens path for a rule: as it leads, or, with noLinks, only when no part of it is a
// link (openat2's RESOLVE_NO_SYMLINKS; a kernel without openat2 refuses, never follows).
func openRulePath(path string, noLinks bool) (int, error) {
	if !noLinks {
		return unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err == unix.ELOOP {
		return -1, fmt.Errorf("a part of it became a link after it was checked: refused (%w)", err)
	}
	return fd, err
}

// execProvider replaces this process by the provider, with the environment env: the file open
// as descriptor fd when fd is set (closed in the provider), else the one at argv[0]. Landlock
// checks the right to execute on the file the descriptor holds, wherever its path is now.
func execProvider(argv, env []string, fd int) error {
	path := argv[0]
	if fd > 0 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fmt.Errorf("the checked executable of %s, descriptor %d, is not an open file (%v): oprov hands it to this step", argv[0], fd, err)
		}
		syscall.CloseOnExec(fd)
		path = "/proc/self/fd/" + strconv.Itoa(fd)
	}
	err := syscall.Exec(path, argv, env)
	return fmt.Errorf("exec %s: %w", argv[0], err)
}
