//go:build !windows

package plugin

import (
	"os/exec"
	"syscall"
)

// ownGroup starts the provider in a process group of its own, so that oprov decides when it
// stops (a terminal's Ctrl-C goes to oprov, which shuts the provider down) and so that anything
// it started can be ended with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// ownSession starts the sandbox step in a session of its own, which is also a process group of
// its own (killGroup reaches it the same way), so that a sandboxed provider has no controlling
// terminal. (The step checks that it leads a session; it cannot start one as a group leader.)
func ownSession(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// killGroup kills every process left in the provider's group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
