package stdiohost

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the program when oprov dies, however it dies.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
