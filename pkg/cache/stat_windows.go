package cache

import "io/fs"

// openNoFollow: Windows opens a symbolic link's target; checkOwn has already refused links in
// the cache.
const openNoFollow = 0

// ownerOf: Windows files have no user and group ids (private_windows.go reads their owners).
func ownerOf(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
