//go:build unix

package main

import "syscall"

// openFilesLimit is the process's limit on open files, if the system has one.
func openFilesLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0, false
	}
	return rl.Cur, true
}
