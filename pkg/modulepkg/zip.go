// Package modulepkg is OpenTofu's module package (format.md, "modules"): a module directory as one
// deterministic zip, published as ONE image manifest with artifactType
// application/vnd.opentofu.modulepkg, the OCI empty config and exactly one archive/zip layer whose
// root is the module's root. It zips a directory, hashes the zip as the module lock records it
// (h1:, zh:), pushes and fetches the package, and unpacks a zip safely.
package modulepkg

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/oprov/oprov/pkg/pkghash"
)

// maxTreeBytes bounds the files Zip reads from a module directory: far above any real module.
const maxTreeBytes = 256 << 20

// zipTime is the one modification time on every entry. Unlike provider zips it ignores
// SOURCE_DATE_EPOCH: a module's zh: is recomputed from the fetched tree on both sides of an air
// gap, so the bytes must not depend on the environment.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// file is one regular file of a module tree.
type file struct {
	name string // slash-separated, relative to the root
	path string // on disk, symlinks resolved
	exec bool
}

// Zip makes the deterministic zip of the module directory dir: its regular files (subdirectories
// kept) sorted by name, one fixed time, modes 0755 for executables and 0644 otherwise, and no
// directory entries. Every entry whose name starts with a dot (.terraform, .git, .terraform.lock.hcl,
// editor files) is left out, with everything under it. A symbolic link is followed when it leads to
// a regular file inside dir and refused otherwise. The same tree always gives the same bytes.
func Zip(dir string) ([]byte, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("module directory %s: %w", dir, err)
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("module directory %s is not a directory (give the directory that holds the module's .tf files)", dir)
	}
	files, err := listTree(root)
	if err != nil {
		return nil, fmt.Errorf("module directory %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("module directory %s holds no files (dot-files are left out)", dir)
	}
	return writeZip(files)
}

// listTree lists the files of a module tree, dot-entries left out, bounded by maxTreeBytes.
func listTree(root string) ([]file, error) {
	var files []file
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		f, size, err := regular(root, p, filepath.ToSlash(rel), d)
		if err != nil {
			return err
		}
		if total += size; total > maxTreeBytes {
			return fmt.Errorf("the module's files pass %d bytes, over the limit for a module", maxTreeBytes)
		}
		files = append(files, f)
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, err
}

// regular describes one tree entry as a file to zip, following a symbolic link that stays inside
// root to a regular file.
func regular(root, p, name string, d fs.DirEntry) (file, int64, error) {
	target := p
	if d.Type()&fs.ModeSymlink != 0 {
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			return file{}, 0, fmt.Errorf("%s is a broken symbolic link: %w", name, err)
		}
		if rel, err := filepath.Rel(root, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return file{}, 0, fmt.Errorf("%s is a symbolic link that leads outside the module (%s); copy the file in instead", name, resolved)
		}
		target = resolved
	}
	st, err := os.Stat(target)
	if err != nil {
		return file{}, 0, err
	}
	if !st.Mode().IsRegular() {
		if st.IsDir() {
			return file{}, 0, fmt.Errorf("%s is a symbolic link to a directory, which a module package cannot hold; copy the directory in instead", name)
		}
		return file{}, 0, fmt.Errorf("%s is not a regular file (%v)", name, st.Mode().Type())
	}
	if strings.ContainsAny(name, "\n\\") {
		return file{}, 0, fmt.Errorf("%q has a newline or backslash in its name, which a module package cannot hold", name)
	}
	return file{name: name, path: target, exec: st.Mode()&0o111 != 0}, st.Size(), nil
}

// writeZip writes the sorted files as a zip with fixed times and modes.
func writeZip(files []file) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: zipTime}
		h.SetMode(0o644)
		if f.exec {
			h.SetMode(0o755)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if err := copyFile(w, f); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func copyFile(w io.Writer, f file) error {
	r, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := io.Copy(w, io.LimitReader(r, maxTreeBytes+1)); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	return nil
}

// Hashes gives a module zip's lock-file hashes: h1 is dirhash's Hash1 over the zip's entries (the
// algorithm pkghash uses for provider zips), zh is "zh:" and the hex sha256 of the zip's bytes.
func Hashes(zipData []byte) (h1, zh string, err error) {
	zr, err := zip.NewReader(bytes.NewReader(zipData), int64(len(zipData)))
	if err != nil {
		return "", "", fmt.Errorf("module package is not a valid zip: %w", err)
	}
	sums := map[string][]byte{}
	for _, f := range zr.File {
		if _, dup := sums[f.Name]; dup {
			return "", "", fmt.Errorf("module package: zip entry %q appears twice", f.Name)
		}
		sum, err := entrySum(f)
		if err != nil {
			return "", "", fmt.Errorf("module package: %w", err)
		}
		sums[f.Name] = sum
	}
	if h1, err = pkghash.H1(sums); err != nil {
		return "", "", err
	}
	whole := sha256.Sum256(zipData)
	return h1, pkghash.ZH(hex.EncodeToString(whole[:])), nil
}

// entrySum is the sha256 of one entry's content, read no further than the unpack limit allows.
func entrySum(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("zip entry %q: %w", f.Name, err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(rc, DefaultLimits.MaxTotal+1))
	if err != nil {
		return nil, fmt.Errorf("zip entry %q: %w", f.Name, err)
	}
	if n > DefaultLimits.MaxTotal {
		return nil, fmt.Errorf("zip entry %q unpacks to more than %d bytes (a zip bomb?)", f.Name, DefaultLimits.MaxTotal)
	}
	return h.Sum(nil), nil
}
