//go:build unix

package cache

import (
	"io/fs"
	"syscall"
)

const openNoFollow = syscall.O_NOFOLLOW

// ownerOf is the user and group that own a file.
func ownerOf(st fs.FileInfo) (uid, gid int, ok bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(sys.Uid), int(sys.Gid), true
}
