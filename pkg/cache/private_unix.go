//go:build unix

package cache

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// On Unix systems a cache is private by its owners and mode bits: see checkPrivate.

// checkAbove checks a directory above the cache: a symbolic link there is judged by its own
// directory; a directory must belong to this user or root, and be writable by no one else unless
// it is sticky (then others cannot rename or remove what is not theirs).
func checkAbove(p, cacheDir string) error {
	st, uid, err := lstatOwner(p)
	if err != nil || st.Mode()&fs.ModeSymlink != 0 {
		return err
	}
	if uid != os.Geteuid() && uid != 0 {
		return notOwned(p, uid, cacheDir)
	}
	shared := st.Mode().Perm()&0o002 != 0 || st.Mode().Perm()&0o020 != 0 && !ownGroup(st)
	if shared && st.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s, above the cache %s, can be written by its group or by others and is not sticky (mode %s): whoever can write it can put other files in the cache's place between a provider's check and its launch, so nothing was used (run 'chmod go-w %s', or set OPROV_CACHE_DIR to a cache of your own)",
			p, cacheDir, st.Mode(), p)
	}
	return nil
}

// checkOwn checks a directory (dir) or file of the cache: this user's or root's, writable by no
// one else, and a directory where one is expected (never a link).
func checkOwn(p, cacheDir string, dir bool) error {
	st, uid, err := lstatOwner(p)
	if err != nil {
		return err
	}
	if dir && !st.IsDir() {
		return fmt.Errorf("%s in the cache %s is not a directory (%s): nothing was used (run 'oprov cache verify --fix')", p, cacheDir, st.Mode().Type())
	}
	if uid != os.Geteuid() && uid != 0 {
		return notOwned(p, uid, cacheDir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s in the cache can be written by its group or by others (mode %s): whoever can write it can swap a provider between its check and its launch, so nothing was used (run 'chmod -R go-w %s', or set OPROV_CACHE_DIR to a cache of your own)",
			p, st.Mode(), cacheDir)
	}
	return nil
}

// ownGroup reports whether a file's group is this user's private group (named as the user, the
// user's primary group, and with no one else in it by the system's files, privateGroup): a
// group-writable directory of such a group, as a umask of 002 makes (~/.cache on many systems),
// is writable by this user alone.
func ownGroup(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(sys.Gid) != os.Getegid() {
		return false
	}
	u, err := user.Current()
	if err != nil {
		return false
	}
	g, err := user.LookupGroupId(strconv.Itoa(int(sys.Gid)))
	return err == nil && g.Name == u.Username && u.Gid == g.Gid && privateGroup(u.Username, g.Gid, groupFiles)
}

func lstatOwner(p string) (os.FileInfo, int, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, 0, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, 0, fmt.Errorf("%s: no file status", p)
	}
	return st, int(sys.Uid), nil
}
