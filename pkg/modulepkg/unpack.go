package modulepkg

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/pkg/pkghash/unzip"
)

// DefaultLimits bound what a module zip may unpack to: modules are text, far under these.
var DefaultLimits = unzip.Limits{MaxTotal: 512 << 20, MaxFiles: 20000, MaxRatio: 100}

// Unpack unpacks a module zip into dest, which must not exist yet. It is written whole (into a
// temporary directory beside dest, renamed at the end) or not at all, and refuses absolute names,
// "../", symbolic links and other non-regular entries, duplicate names and archives that unpack
// beyond DefaultLimits.
func Unpack(zipData []byte, dest string) error {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return err
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(parent)
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := UnpackIn(context.Background(), zipData, root, filepath.Base(abs), DefaultLimits); err != nil {
		return fmt.Errorf("unpacking a module into %s: %w", dest, err)
	}
	return nil
}

// Unpacked is what an unpack wrote.
type Unpacked struct {
	Bytes int64
	Files int
}

// UnpackIn unpacks a module zip into dest, a name relative to root, which must not exist yet.
// Every directory, file and rename goes through root, so nothing can be written outside it: not
// by an entry's name, not by dest's (an absolute name, "..", a NUL), not through a symbolic link
// on the way. The checks of Unpack hold, within limits (bytes and entries in all, and the
// expansion of each entry); the package is written whole or not at all.
func UnpackIn(ctx context.Context, zipData []byte, root *os.Root, dest string, limits unzip.Limits) (Unpacked, error) {
	var done Unpacked
	if err := CheckName(dest); err != nil {
		return done, err
	}
	if _, err := root.Lstat(dest); err == nil {
		return done, fmt.Errorf("%s exists already (remove it first)", dest)
	}
	zr, err := zip.NewReader(bytes.NewReader(zipData), int64(len(zipData)))
	if err != nil {
		return done, fmt.Errorf("the module's zip is not a valid zip: %w", err)
	}
	if err := unzip.CheckEntries(zr, limits); err != nil {
		return done, err
	}
	parent := filepath.Dir(dest)
	if err := root.MkdirAll(parent, 0o755); err != nil {
		return done, err
	}
	tmp := filepath.Join(parent, "."+filepath.Base(dest)+".tmp-"+strings.ToLower(rand.Text()))
	if err := root.Mkdir(tmp, 0o700); err != nil {
		return done, err
	}
	renamed := false
	defer func() {
		if !renamed {
			root.RemoveAll(tmp)
		}
	}()
	for _, f := range zr.File {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		target := filepath.Join(tmp, filepath.FromSlash(path.Clean(f.Name)))
		if f.Mode().IsDir() || strings.HasSuffix(f.Name, "/") {
			if err := root.MkdirAll(target, 0o755); err != nil {
				return done, err
			}
			continue
		}
		n, err := writeEntry(ctx, root, f, target, limits.MaxTotal-done.Bytes)
		done.Bytes += n
		done.Files++
		if err != nil {
			return done, err
		}
		if f.CompressedSize64 > 0 && n > 1<<20 && n/int64(f.CompressedSize64) > limits.MaxRatio {
			return done, fmt.Errorf("%w: zip entry %q expands %dx, over the limit of %dx (a zip bomb?)", unzip.ErrUnsafeArchive, f.Name, n/int64(f.CompressedSize64), limits.MaxRatio)
		}
	}
	if err := root.Chmod(tmp, 0o755); err != nil {
		return done, err
	}
	if err := root.Rename(tmp, dest); err != nil {
		return done, err
	}
	renamed = true
	return done, nil
}

// CheckName refuses a name that is not a plain relative path inside a directory: empty, absolute,
// with "..", a backslash or a NUL.
func CheckName(name string) error {
	if name == "" || !filepath.IsLocal(name) || strings.ContainsAny(name, "\\\x00") || name != filepath.Clean(name) {
		return fmt.Errorf("%q is not a name inside the directory (no absolute path, '..', backslash or NUL)", name)
	}
	return nil
}

// writeEntry writes one zip entry through root, never more than budget bytes whatever its header
// claims.
func writeEntry(ctx context.Context, root *os.Root, f *zip.File, target string, budget int64) (int64, error) {
	if err := root.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return 0, err
	}
	mode := os.FileMode(0o644)
	if f.Mode()&0o111 != 0 {
		mode = 0o755
	}
	rc, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("zip entry %q: %w", f.Name, err)
	}
	defer rc.Close()
	out, err := root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(iox.ContextReader(ctx, rc), budget+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if n > budget {
		return n, fmt.Errorf("%w: unpacks to more than the limit of %d bytes (a zip bomb?)", unzip.ErrUnsafeArchive, budget)
	}
	if err != nil {
		return n, fmt.Errorf("zip entry %q: %w", f.Name, err)
	}
	return n, nil
}
