// Package scratch gives every temporary file oprov writes a visible owner, so that what a killed
// process leaves behind can be removed at once, and what a live one is writing never is.
//
// An owner is a directory PARENT/.oprov-tmp-PID-RAND/ and, beside it, a lock file
// PARENT/.oprov-tmp-PID-RAND.lock that the owning process holds locked (flock) for as long as
// the directory is in use. The lock file is created and locked before the directory exists and
// removed only after it is gone, so a directory without its lock file is never in use. When a
// process dies, however it dies, the operating system drops its lock: any later Sweep of PARENT
// can take the lock and remove the directory. A live owner's lock cannot be taken, so its files
// are never touched. No clock is involved.
package scratch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Prefix starts the name of every owner directory and lock file.
const Prefix = ".oprov-tmp-"

const lockSuffix = ".lock"

// Dir is a directory of temporary files owned by this process until Release.
type Dir struct {
	// Path is the owner directory. Files made in it can be renamed to anywhere on the same file
	// system as PARENT.
	Path string

	mu   sync.Mutex
	lock *os.File // the locked lock file; nil once released
}

// claimAttempts bounds the retries when sweepers catch a claim half made (between the creation
// of its lock file and the lock, a few system calls): only ever seen with sweeps in a tight loop.
const claimAttempts = 100

// Claim makes a new owner directory in parent (which must exist) and locks it for this process.
func Claim(parent string) (*Dir, error) {
	for i := 0; i < claimAttempts; i++ {
		if d, err := tryClaim(parent); d != nil || err != nil {
			return d, err
		}
		time.Sleep(time.Duration(i) * 100 * time.Microsecond)
	}
	return nil, fmt.Errorf("temporary directory in %s: lost the owner lock %d times to other processes", parent, claimAttempts)
}

// tryClaim makes one attempt: (nil, nil) means a sweeper took the new lock file first.
func tryClaim(parent string) (*Dir, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	base := filepath.Join(parent, Prefix+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(rnd[:]))
	// The lock is taken on the descriptor that created the file, at once. A lock file name is
	// made only here, never again, so once a sweeper has removed it nothing can bring its
	// directory back to life.
	f, err := os.OpenFile(base+lockSuffix, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("temporary directory in %s: %w", parent, err)
	}
	ok, err := tryLock(f)
	if err != nil {
		os.Remove(base + lockSuffix)
		f.Close()
		return nil, fmt.Errorf("temporary directory in %s: locking: %w", parent, err)
	}
	// Between the creation and the lock, a sweeper may have locked the new file (then it
	// removes it) or already removed it (then this lock guards nothing): start over.
	if !ok || !lockedAtPath(f, base+lockSuffix) {
		f.Close()
		return nil, nil
	}
	if err := os.Mkdir(base, 0o700); err != nil {
		os.Remove(base + lockSuffix)
		f.Close()
		return nil, fmt.Errorf("temporary directory in %s: %w", parent, err)
	}
	return &Dir{Path: base, lock: f}, nil
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

// Release removes the owner directory with everything still in it, then gives up the lock and
// removes the lock file. It is safe to call more than once.
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
	if rerr := os.Remove(d.Path + lockSuffix); err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	d.lock.Close()
	d.lock = nil
	return err
}

// WriteFile writes dest through a temporary file in d: written, synced, then renamed into place,
// so dest is either whole or absent. d must be on dest's file system.
func (d *Dir) WriteFile(dest string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(d.Path, filepath.Base(dest)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if runtime.GOOS != "windows" {
		if err = os.Chmod(f.Name(), 0o644); err != nil {
			return err
		}
	}
	return os.Rename(f.Name(), dest)
}

// Beside sweeps parent of what dead owners left there, then claims a new owner directory in it:
// for temporary files written next to a user's own files (pull's output directory, save's
// tarball), where the next run to the same place is the one that cleans up.
func Beside(parent string) (*Dir, error) {
	Sweep(parent)
	return Claim(parent)
}

// WriteFileAtomic writes dest through an owner directory beside it (see Beside and WriteFile).
func WriteFileAtomic(dest string, write func(io.Writer) error) error {
	d, err := Beside(filepath.Dir(dest))
	if err != nil {
		return err
	}
	err = d.WriteFile(dest, write)
	if rerr := d.Release(); err == nil {
		err = rerr
	}
	return err
}

// IsOwned reports whether a name in a parent directory belongs to this scheme (an owner directory
// or its lock file).
func IsOwned(name string) bool { return strings.HasPrefix(name, Prefix) }
