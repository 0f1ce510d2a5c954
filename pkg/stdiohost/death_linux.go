package stdiohost

import (
	"os/exec"
	"syscall"
)

// setDeathSignal puts the program in a process group of its own, so that stopping it stops
// what it started too, and kills it when oprov dies, however oprov dies.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// killGroup kills the program's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
