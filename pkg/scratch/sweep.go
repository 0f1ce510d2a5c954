package scratch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Owner describes one owner directory found in a parent directory.
type Owner struct {
	Path  string    `json:"path"`
	PID   int       `json:"pid"`   // the process that made it (for reports; the lock decides)
	Live  bool      `json:"live"`  // its process still holds the lock
	Size  int64     `json:"size"`  // bytes of the files in it
	Files int       `json:"files"` // files in it
	Since time.Time `json:"since"` // when it was claimed
}

// Swept says what a Sweep removed.
type Swept struct {
	Owners int   `json:"owners"`
	Bytes  int64 `json:"bytes"`
}

// Add adds another sweep's result to s.
func (s *Swept) Add(o Swept) { s.Owners, s.Bytes = s.Owners+o.Owners, s.Bytes+o.Bytes }

// owners lists the owner base paths in parent (each owner once, whether its directory, its lock
// file, or both are there), sorted.
func owners(parent string) []string {
	entries, _ := os.ReadDir(parent)
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		if !IsOwned(e.Name()) {
			continue
		}
		base := filepath.Join(parent, strings.TrimSuffix(e.Name(), lockSuffix))
		if !seen[base] {
			seen[base] = true
			out = append(out, base)
		}
	}
	sort.Strings(out)
	return out
}

// Sweep removes, from parent, every owner directory whose process is gone, with its lock file.
// Live owners are left alone. A missing parent is an empty one.
func Sweep(parent string) Swept {
	var s Swept
	for _, base := range owners(parent) {
		if n, ok := sweepOne(base); ok {
			s.Owners++
			s.Bytes += n
		}
	}
	return s
}

// sweepOne removes one owner if its lock can be taken, and gives the bytes it held.
func sweepOne(base string) (int64, bool) {
	f, err := os.Open(base + lockSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		// A directory without its lock file is never in use (the lock file comes first and goes
		// last); a lock file gone since the listing took its directory with it.
		if _, err := os.Lstat(base); err != nil {
			return 0, false
		}
		size, _ := Usage(base)
		return size, os.RemoveAll(base) == nil
	}
	if err != nil {
		return 0, false // not ours to judge (another user's)
	}
	defer f.Close() // drops the lock, after the lock file is gone
	if ok, err := tryLock(f); err != nil || !ok || !lockedAtPath(f, base+lockSuffix) {
		return 0, false // live, or removed since it was opened
	}
	// The lock file goes while still locked: unlocked first, a claim that had just made a file
	// of the same name could lock it and then lose it to this removal.
	size, _ := Usage(base)
	if os.RemoveAll(base) != nil {
		return 0, false
	}
	os.Remove(base + lockSuffix)
	return size, true
}

// List describes every owner in parent, live or not, without removing anything.
func List(parent string) []Owner {
	var out []Owner
	for _, base := range owners(parent) {
		o := Owner{Path: base}
		name := strings.TrimPrefix(filepath.Base(base), Prefix)
		if pid, _, ok := strings.Cut(name, "-"); ok {
			o.PID, _ = strconv.Atoi(pid)
		}
		if f, err := os.Open(base + lockSuffix); err == nil {
			if st, err := f.Stat(); err == nil {
				o.Since = st.ModTime()
			}
			ok, err := tryLock(f)
			o.Live = err == nil && !ok
			f.Close()
		}
		o.Size, o.Files = Usage(base)
		out = append(out, o)
	}
	return out
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
