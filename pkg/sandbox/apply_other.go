//go:build !linux

package sandbox

import (
	"errors"
	"runtime"
)

// Probe reports that this system has none of what a sandbox needs: Landlock and seccomp are
// Linux's.
func Probe() Support {
	return Support{OS: runtime.GOOS, Why: "Landlock and seccomp are Linux's; " + runtime.GOOS + " has neither"}
}

func apply(s Spec) error {
	if !s.BestEffort {
		return errors.New("providers cannot be sandboxed on " + runtime.GOOS + " (Landlock and seccomp are Linux's): refusing to start the provider unconfined")
	}
	return nil
}

func execProvider(argv, env []string, fd int) error {
	return errors.New("the sandbox exec step runs on Linux only (on " + runtime.GOOS + " oprov starts providers directly)")
}
