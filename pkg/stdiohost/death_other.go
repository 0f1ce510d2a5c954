//go:build !linux

package stdiohost

import "os/exec"

// setDeathSignal does nothing here: the program still ends when its stdin closes.
func setDeathSignal(*exec.Cmd) {}

// killGroup kills the program.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
