package scratch

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Owner describes one owned lock found in a parent directory, with what it guards.
type Owner struct {
	Path  string    `json:"path"`  // the owner directory, or the temporary file that is its own lock
	PID   int       `json:"pid"`   // the process that made it (for reports; the lock decides)
	Live  bool      `json:"live"`  // its process still holds the lock
	Size  int64     `json:"size"`  // bytes of the files it guards
	Files int       `json:"files"` // files it guards
	Since time.Time `json:"since"` // when it was made (a temporary file: last written)
}

// Swept says what a Sweep removed.
type Swept struct {
	Owners int   `json:"owners"`
	Bytes  int64 `json:"bytes"`
}

// Add adds another sweep's result to s.
func (s *Swept) Add(o Swept) { s.Owners, s.Bytes = s.Owners+o.Owners, s.Bytes+o.Bytes }

// guarded gives what an owned lock file guards besides itself: the owner directory named like it
// without ".lock" (none for a temporary file that is its own lock, or a directory not made yet).
func guarded(lock string) string {
	if dir, ok := strings.CutSuffix(lock, lockSuffix); ok {
		return dir
	}
	return ""
}

// Sweep removes, from parent, everything owned by processes that are gone: each owned file
// whose lock can be taken, with the owner directory it guards. Live owners are left alone, and
// so is anything whose name only looks like oprov's (see IsOwned), or a directory of an owned
// name without its lock file. A missing parent is an empty one.
func Sweep(parent string) Swept {
	var s Swept
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if !e.Type().IsRegular() || !isLockName(e.Name()) {
			continue
		}
		if n, ok := sweepLocked(filepath.Join(parent, e.Name())); ok {
			s.Add(Swept{Owners: 1, Bytes: n})
		}
	}
	return s
}

// sweepLocked removes an owned file, and the directory it guards, if its lock can be taken.
func sweepLocked(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false // gone since the listing, or not ours to judge (another user's)
	}
	if ok, err := tryLock(f); err != nil || !ok || !lockedAtPath(f, path) {
		f.Close()
		return 0, false // live, or removed since it was opened
	}
	size, _ := Usage(path)
	if dir := guarded(path); dir != "" {
		n, _ := Usage(dir)
		size += n
		if os.RemoveAll(dir) != nil {
			f.Close()
			return 0, false
		}
	}
	// The file goes while still locked: unlocked first, a new file of the same name (made by
	// another claim at that moment) could be locked and then lost to this removal.
	removeLocked(f)
	return size, true
}

// List describes every owner in parent, live or not, without removing anything.
func List(parent string) []Owner {
	var out []Owner
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if !IsOwned(e.Name()) {
			continue
		}
		path := filepath.Join(parent, e.Name())
		o := Owner{Path: path}
		if e.IsDir() || !isLockName(e.Name()) {
			continue // a directory is described with its lock file; one without is not oprov's to judge
		}
		o.Live, o.Since = probe(path)
		if dir := guarded(path); dir != "" {
			o.Path = dir
		}
		if pid, _, ok := strings.Cut(strings.TrimPrefix(e.Name(), Prefix), "-"); ok {
			o.PID, _ = strconv.Atoi(pid)
		}
		o.Size, o.Files = Usage(o.Path) // a lock file holds nothing: what counts is its directory
		out = append(out, o)
	}
	return out
}

// probe tells whether an owned file's lock is held, and when the file was made.
func probe(path string) (live bool, since time.Time) {
	f, err := os.Open(path)
	if err != nil {
		return false, since
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		since = st.ModTime()
	}
	ok, err := tryLock(f)
	return err == nil && !ok, since
}

// Usage gives the bytes and number of the regular files under path (a file or a directory):
// what an entry occupies.
func Usage(path string) (size int64, files int) {
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
				files++
			}
		}
		return nil
	})
	return size, files
}
