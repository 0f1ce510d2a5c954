package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// pinExecutable keeps the fingerprint the check took of the executable, for OpenExecutable.
func (in *Installed) pinExecutable() error {
	stamps := in.stamps
	in.stamps = nil
	if !haveStamps {
		return nil // launched by path, after the hash check (stamp_other.go)
	}
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
	f, err := os.OpenFile(in.Executable, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return nil, fmt.Errorf("provider executable %s: %w", in.Executable, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("provider executable %s: %w", in.Executable, err)
	}
	st, ok := stampOf(in.exe.Path, info)
	if !ok || st != *in.exe {
		f.Close()
		return nil, fmt.Errorf("provider executable %s %w after its check: it is not the file whose hash was proved, so it was not launched (run 'oprov cache verify --fix', then run again; if this repeats, something else writes the cache %s)",
			in.Executable, ErrDamaged, in.Root)
	}
	return f, nil
}
