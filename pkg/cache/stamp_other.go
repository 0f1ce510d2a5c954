//go:build !linux

package cache

import "io/fs"

// haveStamps: fingerprints and the launch pin are built on Linux's file status only (its inode
// and a ctime no call can set back). Elsewhere an unpacked package is hashed on every use, and its
// executable is launched by path after that hash, in a cache only its user can write
// (checkPrivate).
const haveStamps = false

func stampOf(string, fs.FileInfo) (fileStamp, bool) { return fileStamp{}, false }
