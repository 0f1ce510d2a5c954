// Package unzip unpacks provider packages safely: whole or not at all, with no path traversal,
// links, duplicate entries or zip bombs, computing the package's h1: hash from what it writes.
package unzip

import (
	"archive/zip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/pkg/pkghash"
)

// Limits bound what an archive may unpack to.
type Limits struct {
	MaxTotal int64 // bytes unpacked in all
	MaxFiles int   // entries
	MaxRatio int64 // unpacked bytes per compressed byte, per entry (for entries over 1 MiB)
}

// DefaultLimits suit provider packages: a provider executable is tens to a few hundred
// megabytes and compresses about 3:1.
var DefaultLimits = Limits{MaxTotal: 2 << 30, MaxFiles: 10000, MaxRatio: 100}

// ErrUnsafeArchive marks an archive refused by Extract.
var ErrUnsafeArchive = errors.New("unsafe archive")

func unsafef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsafeArchive, fmt.Sprintf(format, args...))
}

// ExtractIn unpacks the zip at zipPath into dest, which must not exist yet: it is created whole
// (from a temporary directory made beside it, renamed at the end) or not at all, and the work
// ends when ctx is done. It refuses absolute paths, path traversal, symlinks and other
// non-regular entries, duplicate entries, and archives that unpack beyond limits (zip bombs),
// counting the bytes actually written rather than trusting the headers. Executables keep their
// executable bit; nothing else keeps its mode. It computes the package's h1: hash from what it
// unpacks (the same hash pkghash.ZipH1 gives, without reading the zip a second time) and, when
// check is set, hands it to check before the package is renamed into place: an error from check
// leaves nothing.
//
// dest is a name relative to root, which may come from outside (a
// provider's address, version and platform): dest's parents are made, the temporary directory
// is made beside dest, and it is renamed to dest, all through root, so neither dest nor any entry
// of the zip can lead a write out of root, whatever its parts hold.
func ExtractIn(ctx context.Context, zipPath string, root *os.Root, dest string, limits Limits, check func(h1 string) error) error {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return fmt.Errorf("%s is not a valid zip: %w", zipPath, err)
	}
	defer zr.Close()
	if err := checkEntries(&zr.Reader, limits); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(zipPath), err)
	}
	if err := root.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("unpacking into %s: %w", filepath.Join(root.Name(), dest), err)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-"+hex.EncodeToString(rnd[:]))
	if err := root.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("unpacking into %s: %w", filepath.Join(root.Name(), dest), err)
	}
	defer root.RemoveAll(tmp) // a no-op once renamed
	sub, err := root.OpenRoot(tmp)
	if err != nil {
		return err
	}
	err = unpackChecked(ctx, &zr.Reader, sub, filepath.Base(zipPath), limits, check)
	if cerr := sub.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := root.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return root.Rename(tmp, dest)
}

// unpackChecked unpacks zr into root and hands the h1: of what it wrote to check, if set.
func unpackChecked(ctx context.Context, zr *zip.Reader, root *os.Root, zipName string, limits Limits, check func(h1 string) error) error {
	sums, err := unpack(ctx, zr, root, limits)
	if err != nil {
		return fmt.Errorf("%s: %w", zipName, err)
	}
	if check == nil {
		return nil
	}
	h1, err := pkghash.H1(sums)
	if err != nil {
		return err
	}
	return check(h1)
}

// CheckEntries refuses a zip whose entries Extract would refuse before writing anything (an
// escaping or absolute name, a link, a name twice, more than the limits declare), writing nothing:
// for a zip that is checked but not unpacked.
func CheckEntries(zr *zip.Reader, limits Limits) error { return checkEntries(zr, limits) }

// checkEntries refuses unsafe entries before anything is written.
func checkEntries(zr *zip.Reader, limits Limits) error {
	if len(zr.File) > limits.MaxFiles {
		return unsafef("%d entries, over the limit of %d", len(zr.File), limits.MaxFiles)
	}
	seen := map[string]bool{}
	var declared uint64
	for _, f := range zr.File {
		if err := CheckEntryPath(f.Name); err != nil {
			return unsafef("%v", err)
		}
		mode := f.Mode()
		switch {
		case mode&os.ModeSymlink != 0:
			return unsafef("zip entry %q is a symbolic link", f.Name)
		case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
		case !mode.IsRegular():
			return unsafef("zip entry %q is not a regular file (mode %v)", f.Name, mode)
		}
		clean := path.Clean(strings.TrimSuffix(f.Name, "/"))
		key := strings.ToLower(clean) // refuse names that collide on case-insensitive file systems too
		if seen[key] {
			return unsafef("zip entry %q appears twice", f.Name)
		}
		seen[key] = true
		declared += f.UncompressedSize64
		if declared > uint64(limits.MaxTotal) {
			return unsafef("declares %d bytes unpacked, over the limit of %d", declared, limits.MaxTotal)
		}
		if f.CompressedSize64 > 0 && f.UncompressedSize64 > 1<<20 && f.UncompressedSize64/f.CompressedSize64 > uint64(limits.MaxRatio) {
			return unsafef("zip entry %q expands %dx, over the limit of %dx (a zip bomb?)", f.Name, f.UncompressedSize64/f.CompressedSize64, limits.MaxRatio)
		}
	}
	// A file may not also be used as a directory ("a" and "a/b").
	for name := range seen {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if seen[dir] && !isDirEntry(zr, dir) {
				return unsafef("zip entry %q is both a file and a directory", dir)
			}
		}
	}
	return nil
}

func isDirEntry(zr *zip.Reader, lowerName string) bool {
	for _, f := range zr.File {
		if strings.ToLower(path.Clean(strings.TrimSuffix(f.Name, "/"))) == lowerName {
			return f.Mode().IsDir() || strings.HasSuffix(f.Name, "/")
		}
	}
	return false
}

// unpack writes the entries under root and gives the sha256 of each entry's content, by entry
// name (a directory entry's content is empty), for the package's h1: hash. Every name goes
// through root: checkEntries refused escaping names already, and root refuses any that slipped
// past it, or that a link would carry elsewhere.
func unpack(ctx context.Context, zr *zip.Reader, root *os.Root, limits Limits) (map[string][]byte, error) {
	dirs := &dirRoots{root: root, open: map[string]*os.Root{}}
	defer dirs.close()
	var total int64
	sums := map[string][]byte{}
	for _, f := range zr.File {
		if err := CheckEntryPath(f.Name); err != nil {
			return nil, unsafef("%v", err)
		}
		name := filepath.FromSlash(path.Clean(f.Name))
		if f.Mode().IsDir() || strings.HasSuffix(f.Name, "/") {
			if _, err := dirs.get(name); err != nil {
				return nil, unsafef("zip entry %q: %v", f.Name, err)
			}
			empty := sha256.Sum256(nil)
			sums[f.Name] = empty[:]
			continue
		}
		dir, err := dirs.get(filepath.Dir(name))
		if err != nil {
			return nil, unsafef("zip entry %q: %v", f.Name, err)
		}
		mode := os.FileMode(0o644)
		if f.Mode()&0o111 != 0 {
			mode = 0o755
		}
		h := sha256.New()
		n, err := writeEntry(ctx, f, dir, filepath.Base(name), mode, limits.MaxTotal-total, h)
		total += n
		if err != nil {
			return nil, err
		}
		if f.CompressedSize64 > 0 && n > 1<<20 && n/int64(f.CompressedSize64) > limits.MaxRatio {
			return nil, unsafef("zip entry %q expands %dx, over the limit of %dx (a zip bomb?)", f.Name, n/int64(f.CompressedSize64), limits.MaxRatio)
		}
		sums[f.Name] = h.Sum(nil)
	}
	return sums, nil
}

// dirRoots makes the directories of an archive below root and keeps each open as an os.Root of
// its own, so that a file is created with one call in its directory rather than by walking every
// component of its name again (the walk os.Root does, component by component, to stay inside).
type dirRoots struct {
	root *os.Root
	open map[string]*os.Root
}

// maxOpenDirs bounds the directories dirRoots keeps open: one descriptor each.
const maxOpenDirs = 64

// get makes dir (relative to the root) and its parents through the root, and gives it opened.
func (d *dirRoots) get(dir string) (*os.Root, error) {
	if dir == "." {
		return d.root, nil
	}
	if r, ok := d.open[dir]; ok {
		return r, nil
	}
	if err := d.root.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if len(d.open) >= maxOpenDirs { // archives list a directory's files together: start afresh
		d.close()
		clear(d.open)
	}
	r, err := d.root.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	d.open[dir] = r
	return r, nil
}

func (d *dirRoots) close() {
	for _, r := range d.open {
		r.Close()
	}
}

// writeEntry writes one entry as name under root (and into sum), never more than budget bytes
// whatever its header claims.
func writeEntry(ctx context.Context, f *zip.File, root *os.Root, name string, mode os.FileMode, budget int64, sum io.Writer) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("zip entry %q: %w", f.Name, err)
	}
	defer rc.Close()
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, unsafef("zip entry %q: %v", f.Name, err)
	}
	n, err := io.Copy(io.MultiWriter(out, sum), io.LimitReader(iox.ContextReader(ctx, rc), budget+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if n > budget {
		return n, unsafef("unpacks to more than the limit of bytes (a zip bomb?)")
	}
	if err != nil {
		return n, fmt.Errorf("zip entry %q: %w", f.Name, err)
	}
	return n, nil
}

// CheckEntryPath refuses zip entry names that are absolute, contain "..", or use backslashes or NULs.
func CheckEntryPath(name string) error {
	switch {
	case name == "":
		return errors.New("zip entry with an empty name")
	case strings.Contains(name, "\\"):
		return fmt.Errorf("zip entry %q contains a backslash", name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("zip entry %q contains a NUL", name)
	case strings.HasPrefix(name, "/") || filepath.IsAbs(name) || (len(name) > 1 && name[1] == ':'):
		return fmt.Errorf("zip entry %q is an absolute path", name)
	}
	for _, part := range strings.Split(path.Clean(name), "/") {
		if part == ".." {
			return fmt.Errorf("zip entry %q points outside the package (path traversal)", name)
		}
	}
	return nil
}
