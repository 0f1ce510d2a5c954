package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The launch check (fingerprint.go, install.go) proves an entry's files at one moment; a provider
// runs a moment later. Two things keep what runs the thing checked:
//
//   - the cache must be this user's alone: every directory from the file system's root down to an
//     entry, and every file of an unpacked entry, owned by this user (or root) and writable by
//     nobody else (directories above the cache may be shared if sticky, as /tmp is, and writable
//     by the group if that is the user's own private group, as ~/.cache often is). Whoever else
//     could write there could swap a file between its check and its launch, so such a cache is
//     refused, naming the path and the fix (checkPrivate);
//   - the executable is opened for launch and its descriptor's status compared with the
//     fingerprint the check took (OpenExecutable): the same device, inode, size, mode, mtime and
//     ctime, so the same bytes (a write or a replacement changes the ctime or the inode). The
//     provider host then execs that descriptor, not the path (pkg/plugin).

// checkPrivate refuses a cache entry (dir, under the cache) that another user could change: the
// directories above the cache must be this user's or root's and writable by no one else unless
// sticky (or only by the user's own private group); the cache's directories down to dir this user's or root's and writable by no one else;
// and with tree, every file and directory under dir the same.
func (c *Cache) checkPrivate(dir string, tree bool) error {
	rel, err := filepath.Rel(c.Dir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s is not in the cache %s", dir, c.Dir)
	}
	if err := c.checkAboveOnce(); err != nil {
		return err
	}
	// Down from the cache to dir; what does not exist yet will be made by this process.
	p := c.Dir
	if err := checkOwn(p, c.Dir, true); err != nil {
		return err
	}
	if rel != "." {
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			p = filepath.Join(p, part)
			if err := checkOwn(p, c.Dir, true); errors.Is(err, fs.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	if !tree {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		return checkOwn(p, c.Dir, d.IsDir())
	})
}

// checkAboveOnce checks the directories above the cache (its path as given, and as resolved
// through links) once per Cache: only their owners, this user or root, can change them.
func (c *Cache) checkAboveOnce() error {
	c.aboveOnce.Do(func() {
		roots := []string{c.Dir}
		if real, err := filepath.EvalSymlinks(c.Dir); err == nil && real != c.Dir {
			roots = append(roots, real)
		}
		for _, root := range roots {
			for p := filepath.Dir(root); ; p = filepath.Dir(p) {
				if c.aboveErr = checkAbove(p, c.Dir); c.aboveErr != nil {
					return
				}
				if p == filepath.Dir(p) {
					break
				}
			}
		}
	})
	return c.aboveErr
}

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

// groupFiles are the system's lists of groups and users, read by privateGroup.
var groupFiles = [2]string{"/etc/group", "/etc/passwd"}

// privateGroup reports whether the group gid has no member but the user name: no group entry
// for gid (files[0], the group file) lists another member, and no other user (files[1], the
// password file) has it as primary group. A file that cannot be read makes it not private.
func privateGroup(name, gid string, files [2]string) bool {
	for i, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Split(strings.TrimSpace(line), ":")
			switch {
			case i == 0 && len(f) >= 4 && f[2] == gid:
				for _, m := range strings.Split(f[3], ",") {
					if m = strings.TrimSpace(m); m != "" && m != name {
						return false
					}
				}
			case i == 1 && len(f) >= 4 && f[3] == gid && f[0] != name:
				return false
			}
		}
	}
	return true
}

func notOwned(p string, uid int, cacheDir string) error {
	return fmt.Errorf("%s (for the cache %s) belongs to user %d, not to you (user %d): its owner can swap a provider between its check and its launch, so nothing was used (set OPROV_CACHE_DIR to a cache of your own)",
		p, cacheDir, uid, os.Geteuid())
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

// pinExecutable keeps the fingerprint the check took of the executable, for OpenExecutable.
func (in *Installed) pinExecutable() error {
	stamps := in.stamps
	in.stamps = nil
	rel, err := filepath.Rel(in.Dir, in.Executable)
	if err == nil {
		for i := range stamps {
			if stamps[i].Path == filepath.ToSlash(rel) {
				s := stamps[i]
				in.exe = &s
				return nil
			}
		}
	}
	return fmt.Errorf("the cache's unpacked package %s changed while it was being checked, so nothing was used: run again (and if this repeats, something else writes the cache: run 'oprov cache verify --fix')", in.Dir)
}

// OpenExecutable opens the executable for launch, and only if it is still the very file this
// call checked: the same device, inode, size, mode, mtime and ctime as fingerprinted when its
// package's hash was proved (a write or a chmod moves the ctime; a replacement is another inode
// or ctime). Exec'ing the descriptor rather than the path runs exactly those bytes. A build
// (installed without a hash) gives no file and no error: its executable is run by path.
func (in *Installed) OpenExecutable() (*os.File, error) {
	if in.exe == nil {
		return nil, nil
	}
	f, err := os.OpenFile(in.Executable, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("provider executable %s: %w", in.Executable, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("provider executable %s: %w", in.Executable, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || stampOf(in.exe.Path, st) != *in.exe {
		f.Close()
		return nil, fmt.Errorf("provider executable %s %w after its check: it is not the file whose hash was proved, so it was not launched (run 'oprov cache verify --fix', then run again; if this repeats, something else writes the cache %s)",
			in.Executable, ErrDamaged, in.Root)
	}
	return f, nil
}
