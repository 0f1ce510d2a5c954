package modulepkg

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/oprov/oprov/internal/unzip"
)

// DefaultLimits bound what a module zip may unpack to: modules are text, far under these.
var DefaultLimits = unzip.Limits{MaxTotal: 512 << 20, MaxFiles: 20000, MaxRatio: 100}

// Unpack unpacks a module zip into dest, which must not exist yet. It is written whole (into a
// temporary directory beside dest, renamed at the end) or not at all, and refuses absolute names,
// "../", symbolic links and other non-regular entries, duplicate names and archives that unpack
// beyond DefaultLimits.
func Unpack(zipData []byte, dest string) error {
	return UnpackContext(context.Background(), zipData, dest)
}

// UnpackContext is Unpack that ends when ctx is done.
func UnpackContext(ctx context.Context, zipData []byte, dest string) error {
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("unpacking a module into %s: it exists already (remove it first)", dest)
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if _, err := zip.NewReader(bytes.NewReader(zipData), int64(len(zipData))); err != nil {
		return fmt.Errorf("unpacking a module into %s: the module's zip is not a valid zip: %w", dest, err)
	}
	// unzip.Extract reads a file; it names it by its base name in messages: module.zip.
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".zip-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	zipPath := filepath.Join(tmp, "module.zip")
	if err := os.WriteFile(zipPath, zipData, 0o600); err != nil {
		return err
	}
	if err := unzip.Extract(ctx, zipPath, parent, dest, DefaultLimits, nil); err != nil {
		return fmt.Errorf("unpacking a module into %s: %w", dest, err)
	}
	return nil
}
