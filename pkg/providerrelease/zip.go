package providerrelease

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// ZipFile is one file to put in a deterministic zip.
type ZipFile struct {
	Name       string // path inside the zip, with '/' separators
	Executable bool
	Open       func() (io.ReadCloser, error)
}

// zipTime is the modification time written on every zip entry: SOURCE_DATE_EPOCH when it is set,
// otherwise a fixed date, never the wall clock.
func zipTime() (time.Time, error) {
	earliest := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC) // zip cannot store earlier times
	t, ok, err := SourceDateEpoch()
	switch {
	case err != nil:
		return time.Time{}, err
	case !ok:
		return earliest, nil
	case t.Before(earliest):
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%d: zip files cannot record times before 1980", t.Unix())
	}
	return t, nil
}

// WriteZip writes a deterministic zip: entries sorted by name, one fixed modification time, and
// Unix modes (0755 for executables, 0644 otherwise), so the same files always give the same bytes.
func WriteZip(w io.Writer, files []ZipFile) error {
	mtime, err := zipTime()
	if err != nil {
		return err
	}
	sorted := append([]ZipFile(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	zw := zip.NewWriter(w)
	for i, f := range sorted {
		if i > 0 && sorted[i-1].Name == f.Name {
			return fmt.Errorf("zip entry %q given twice", f.Name)
		}
		h := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: mtime}
		mode := os.FileMode(0o644)
		if f.Executable {
			mode = 0o755
		}
		h.SetMode(mode)
		dst, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		src, err := f.Open()
		if err != nil {
			return err
		}
		_, err = io.Copy(dst, src)
		src.Close()
		if err != nil {
			return fmt.Errorf("zip entry %q: %w", f.Name, err)
		}
	}
	return zw.Close()
}
