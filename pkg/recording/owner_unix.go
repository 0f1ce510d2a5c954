//go:build unix

package recording

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe reports whether this user owns a file.
func ownedByMe(st fs.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Geteuid()
}
