//go:build !linux

package plugin

import (
	"os"
	"os/exec"
)

// runPinned leaves cmd as it is where no /proc/self/fd exists: the executable is run by path,
// after OpenExecutable's check.
func runPinned(*exec.Cmd, *os.File) {}

// pinnable reports that no executable can be exec'd from its descriptor here.
func pinnable(*os.File) bool { return false }
