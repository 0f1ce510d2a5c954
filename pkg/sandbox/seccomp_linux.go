package sandbox

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM inside the sandbox: tracing and reading other processes,
// mounting and namespaces, the kernel keyring, bpf and perf events, kexec and kernel modules.
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev",
	"mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
}

// namespaceFlags are clone's flags that make a new namespace.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// filterPolicy is the seccomp filter: everything is allowed but deniedSyscalls, clone with a
// namespace flag, the terminal ioctls that type into a terminal or paste its selection
// (TIOCSTI, TIOCLINUX; and any ioctl whose request has bits above the 32 the kernel reads, which
// would slip past a comparison of the whole register), clone3 (whose flags a filter cannot see: it fails with ENOSYS, and the C
// library falls back to clone), and sockets that pass around Landlock's TCP rules (raw sockets,
// packet sockets, and Multipath TCP, which Landlock does not restrict).
func filterPolicy() seccomp.Policy {
	cond := func(name string, arg uint32, op seccomp.Operation, v uint64) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: name, Conditions: seccomp.ArgumentConditions{{Argument: arg, Operation: op, Value: v}}}
	}
	sockets := []seccomp.NameWithConditions{
		cond("clone", 0, seccomp.BitsSet, namespaceFlags),
		cond("ioctl", 1, seccomp.Equal, unix.TIOCSTI),
		cond("ioctl", 1, seccomp.Equal, unix.TIOCLINUX),
		cond("ioctl", 1, seccomp.GreaterThan, 0xffffffff),
		cond("socket", 0, seccomp.Equal, unix.AF_PACKET),
		cond("socket", 2, seccomp.Equal, unix.IPPROTO_MPTCP),
	}
	for _, f := range []uint64{0, unix.SOCK_CLOEXEC, unix.SOCK_NONBLOCK, unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK} {
		sockets = append(sockets, cond("socket", 1, seccomp.Equal, unix.SOCK_RAW|f))
	}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: deniedSyscalls, NamesWithCondtions: sockets},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}
