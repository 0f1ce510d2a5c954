//go:build !linux

package plugin

import "os/exec"

// dieWithParent adds nothing where the kernel offers no parent-death signal: the provider is
// stopped when its input ends, as everywhere.
func dieWithParent(*exec.Cmd) {}
