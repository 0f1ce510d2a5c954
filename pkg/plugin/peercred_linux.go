package plugin

import (
	"bytes"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// refusePeer says which process is at the other end of c (SO_PEERCRED) and why it may not use a
// proxy, or "" when it may.
func refusePeer(c net.Conn) (int, string) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, "not a unix socket connection"
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, "its credentials cannot be read: " + err.Error()
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return 0, "its credentials cannot be read"
	}
	if int(cred.Uid) != os.Getuid() {
		return int(cred.Pid), "it runs as another user"
	}
	return int(cred.Pid), allowedPeer(int(cred.Pid), os.Getpid(), parentPid)
}

// parentPid reads a process's parent from /proc/PID/stat (0 when it cannot: the process is gone).
func parentPid(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 2 {
		return 0
	}
	pp, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return 0
	}
	return pp
}
