package recording

import (
	"errors"
	"fmt"
	"io/fs"
)

// createError says why a recording could not be started at path, naming path and its directory
// dir (never the temporary file it is written to first), and the fix.
func createError(path, dir string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("recording %s: the directory %s does not exist: make it first (mkdir -p %s)", path, dir, dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("recording %s: the directory %s cannot be written to: %v", path, dir, err)
	}
	return fmt.Errorf("recording %s: %v", path, err)
}
