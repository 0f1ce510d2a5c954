package cache

import (
	"io/fs"
	"syscall"
)

// haveStamps: this system gives each file a device, an inode and a ctime no call can set back,
// which a fingerprint (fingerprint.go) and the launch pin (OpenExecutable) rest on.
const haveStamps = true

// stampOf is the fingerprint of the file at rel whose status is info.
func stampOf(rel string, info fs.FileInfo) (fileStamp, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStamp{}, false
	}
	return fileStamp{Path: rel, Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size, Mode: uint32(st.Mode),
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, true
}
