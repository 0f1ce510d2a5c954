package loader

import "io/fs"

// fileUID: Windows files have no user id. What it guards (a sandboxed Python provider's own
// directories) does not exist there: a sandbox is refused on Windows.
func fileUID(fs.FileInfo) (int, bool) { return 0, false }
