package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
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
// (TIOCSTI, TIOCLINUX: also refused by nativeFilter, which compares only the 32 bits of the
// request the kernel reads), clone3 (whose flags a filter cannot see: it fails with ENOSYS, and the C
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

// nativeArch is the audit architecture of the system calls this program makes, for the
// architectures nativeFilter knows (little-endian, 64-bit), or 0.
func nativeArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// Offsets in struct seccomp_data: the architecture, and the low half of ioctl's request (the
// second argument) on a little-endian machine.
const (
	seccompArch    = 4
	seccompArg1Low = 16 + 8
)

// loadNativeFilter adds a second seccomp filter (filters stack: the strictest answer wins) that
// filterPolicy's library cannot express: system calls of another ABI than this program's (i386's
// int 0x80 on x86_64, which the first filter lets through unexamined) fail with ENOSYS, and ioctl
// with TIOCSTI or TIOCLINUX fails with EPERM whatever the request's high half holds (the kernel
// reads its low 32 bits; a comparison of the whole register would let a request with high bits
// set through).
func loadNativeFilter() error {
	arch := nativeArch()
	if arch == 0 {
		return nil
	}
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // the system call's number
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_IOCTL, SkipFalse: 4},
		bpf.LoadAbsolute{Off: seccompArg1Low, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCSTI, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCLINUX, SkipFalse: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	})
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp filter of the native ABI and terminal ioctls: %w", err)
	}
	return nil
}
