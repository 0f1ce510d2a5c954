// Package scratch gives every temporary file oprov writes a visible owner, so that what a killed
// process leaves behind can be removed at once, and what a live one is writing never is.
//
// A name in a parent directory is owned only when it has the full form oprov gives it,
// Prefix+PID-RAND (and a suffix for files), never by its prefix alone: a user's own
// ".oprov-tmp-notes" or ".oprov-tmp-mine/" is never touched.
//
//   - a regular file is a lock, held (flock) by the process that made it for as long as it
//     works on it. A temporary file beside a user's target is its own lock; a lock file named
//     X.lock also guards the owner directory X beside it;
//   - an owner directory X holds a process's temporary files. Its lock file is made (and locked)
//     before it and removed after it, so a directory is removed only with its lock file: one
//     without it did not come from a killed run (whichever moment oprov is killed at, the lock
//     file is still there), and oprov cannot tell it made it.
//
// When a process dies, however it dies, the operating system drops its locks: any later Sweep of
// the parent can take them and remove what they guard. A live process's locks cannot be taken, so
// its files are never touched. No clock is involved.
package scratch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Prefix starts every owned name.
const Prefix = ".oprov-tmp-"

const lockSuffix = ".lock"

// ownedName is the full form of an owned name: Prefix, the PID, "-", the random part, and for
// files a suffix (".lock", or "." and the target's name for a temporary file that is its own
// lock). The random part is the 16 hex digits oprov writes: nothing else is taken for ours.
var ownedName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(Prefix) + `[0-9]+-[0-9a-f]{16}(\..+)?$`)
})

// IsOwned reports whether a name in a parent directory has an owned name's full form (see the
// package comment).
func IsOwned(name string) bool { return ownedName().MatchString(name) }

// isLockName reports whether an owned name is a file's (a lock's): it has a suffix.
func isLockName(name string) bool { return IsOwned(name) && strings.Contains(name[len(Prefix):], ".") }

// createAttempts bounds the retries when sweepers catch a new file between its creation and its
// lock (a few system calls apart): only ever seen with sweeps in a tight loop.
const createAttempts = 100

// createLocked creates a new owned file in parent, named Prefix+PID-RAND+suffix, and locks it.
func createLocked(parent, suffix string) (*os.File, error) {
	for i := 0; i < createAttempts; i++ {
		if f, err := tryCreateLocked(parent, suffix); f != nil || err != nil {
			return f, err
		}
		time.Sleep(time.Duration(i) * 100 * time.Microsecond)
	}
	return nil, fmt.Errorf("temporary file in %s: lost its lock %d times to other processes", parent, createAttempts)
}

// tryCreateLocked makes one attempt: (nil, nil) means a sweeper took the new file first.
func tryCreateLocked(parent, suffix string) (*os.File, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	path := filepath.Join(parent, Prefix+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(rnd[:])+suffix)
	// The lock is taken on the descriptor that created the file, at once. An owned name is made
	// only here, never again, so once a sweeper has removed it nothing can bring it back to life.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("temporary file in %s: %w", parent, err)
	}
	ok, err := tryLock(f)
	if err != nil {
		removeLocked(f)
		return nil, fmt.Errorf("temporary file in %s: locking: %w", parent, err)
	}
	// Between the creation and the lock, a sweeper may have locked the new file (then it
	// removes it) or already removed it (then this lock guards nothing): start over.
	if !ok || !lockedAtPath(f, path) {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// lockedAtPath reports whether the locked file f is still the one at path.
func lockedAtPath(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(held, now)
}

// Dir is a directory of temporary files owned by this process until Release.
type Dir struct {
	// Path is the owner directory. Files made in it can be renamed to anywhere on the same file
	// system as its parent.
	Path string

	mu   sync.Mutex
	lock *os.File // the locked lock file; nil once released
}

// Claim makes a new owner directory in parent (which must exist) and locks it for this process.
func Claim(parent string) (*Dir, error) {
	f, err := createLocked(parent, lockSuffix)
	if err != nil {
		return nil, err
	}
	dir := strings.TrimSuffix(f.Name(), lockSuffix)
	if err := os.Mkdir(dir, 0o700); err != nil {
		removeLocked(f)
		return nil, fmt.Errorf("temporary directory in %s: %w", parent, err)
	}
	return &Dir{Path: dir, lock: f}, nil
}

// Beside sweeps parent of what dead owners left there, then claims a new owner directory in it:
// for temporary files written next to a user's own files (a save's layout and tarball), where the
// next run to the same place is the one that cleans up.
func Beside(parent string) (*Dir, error) {
	Sweep(parent)
	return Claim(parent)
}

// Release removes the owner directory with everything still in it, then its lock file, then
// gives up the lock. It is safe to call more than once, and on nil.
func (d *Dir) Release() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return nil
	}
	err := os.RemoveAll(d.Path)
	if rerr := removeLocked(d.lock); err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	d.lock = nil
	return err
}

// removeLocked removes a locked file, then closes it (dropping the lock). Where an open file
// cannot be removed (Windows), it is closed first; there a removal cannot take the file of
// another process that has it open, which is what removing it while locked guards against.
func removeLocked(f *os.File) error {
	if runtime.GOOS == "windows" {
		f.Close()
		return os.Remove(f.Name())
	}
	err := os.Remove(f.Name())
	f.Close()
	return err
}

// WriteFile writes dest through a temporary file in d: written, synced, then renamed into place,
// so dest is either whole or absent. d must be on dest's file system.
func (d *Dir) WriteFile(dest string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(d.Path, filepath.Base(dest)+".*")
	if err != nil {
		return err
	}
	return finish(f, dest, write)
}

// WriteFileAtomic writes dest through a temporary file beside it that is its own lock, so dest is
// either whole or absent, and first removes what killed writers left in dest's directory.
func WriteFileAtomic(dest string, write func(io.Writer) error) error {
	Sweep(filepath.Dir(dest))
	f, err := createLocked(filepath.Dir(dest), "."+filepath.Base(dest))
	if err != nil {
		return err
	}
	return finish(f, dest, write)
}

// finish writes, syncs and closes a temporary file and renames it to dest; on failure it removes
// the temporary file. A lock on f is held until it is renamed (on Windows, where an open file
// cannot be renamed, until just before).
func finish(f *os.File, dest string, write func(io.Writer) error) error {
	err := write(f)
	if err == nil {
		err = f.Sync()
	}
	if err == nil && runtime.GOOS != "windows" {
		if err = os.Chmod(f.Name(), 0o644); err == nil {
			err = os.Rename(f.Name(), dest)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && runtime.GOOS == "windows" {
		err = os.Rename(f.Name(), dest)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// WriteFileIn writes name, a path relative to root, through a temporary file in d: written,
// synced, then renamed into place through root, so dest is either whole or absent and the name
// cannot lead the write out of root (no "..", no absolute name, no link followed out). d must be
// below root.
func (d *Dir) WriteFileIn(root *os.Root, name string, write func(io.Writer) error) error {
	tmpRel, err := filepath.Rel(root.Name(), d.Path)
	if err != nil || tmpRel == ".." || strings.HasPrefix(tmpRel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("temporary directory %s is not below %s", d.Path, root.Name())
	}
	f, err := os.CreateTemp(d.Path, filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(filepath.Join(tmpRel, filepath.Base(f.Name())), name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
