package sandbox

import (
	"errors"
	"os"
	"strconv"

	seccomp "github.com/elastic/go-seccomp-bpf"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Probe asks the kernel what it supports (Landlock's ABI, seccomp filters, no_new_privs). The test
// hook testABIEnv replaces the Landlock ABI it reports.
func Probe() Support {
	s := Support{OS: "linux"}
	abi, err := ll.LandlockGetABIVersion()
	switch {
	case err == nil:
		s.LandlockABI = abi
	case errors.Is(err, unix.ENOSYS):
		s.Why = "the kernel was built without Landlock"
	case errors.Is(err, unix.EOPNOTSUPP):
		s.Why = "Landlock is built in but not enabled: add landlock to the lsm= boot parameter"
	default:
		s.Why = err.Error()
	}
	if v, ok := os.LookupEnv(testABIEnv); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			s.LandlockABI, s.Simulated, s.Why = n, true, testABIEnv+" (a test hook) is set"
		}
	}
	s.Seccomp = seccomp.Supported()
	_, err = unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	s.NoNewPrivs = err == nil
	return s
}
