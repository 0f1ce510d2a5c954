package modulepkg

import (
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
	f, err := os.CreateTemp(parent, "."+filepath.Base(dest)+".zip-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(zipData)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := unzip.Extract(ctx, f.Name(), parent, dest, DefaultLimits, nil); err != nil {
		return fmt.Errorf("unpacking a module into %s: %w", dest, err)
	}
	return nil
}
