//go:build unix

package loader

import (
	"io/fs"
	"syscall"
)

// fileUID is the user that owns a file.
func fileUID(st fs.FileInfo) (int, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(sys.Uid), true
}
