package plugin

import (
	"os/exec"
	"syscall"
)

// dieWithParent asks the kernel to SIGKILL the started process when its parent dies. The signal
// survives the sandbox step's exec of the provider (it is cleared only for set-user-ID programs).
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
