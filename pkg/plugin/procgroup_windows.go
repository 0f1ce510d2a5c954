//go:build windows

package plugin

import "os/exec"

func ownGroup(*exec.Cmd) {}

func ownSession(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}
