package pkghash

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/dirhash"
)

// zipOf builds a zip of name/body pairs; a name ending in "/" is a directory entry.
func zipOf(t testing.TB, method uint16, pairs ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := 0; i+1 < len(pairs); i += 2 {
		h := &zip.FileHeader{Name: pairs[i], Method: method}
		h.SetMode(0o644)
		if strings.HasSuffix(pairs[i], "/") {
			h.SetMode(os.ModeDir | 0o755)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(pairs[i+1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeZip(t testing.TB, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "p.zip")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestZipH1: h1: is what dirhash (OpenTofu) computes, directory entries included.
func TestZipH1(t *testing.T) {
	data := zipOf(t, zip.Deflate, "terraform-provider-x_v1.0.0", strings.Repeat("bin", 100), "docs/", "", "docs/README.md", "hi")
	z := writeZip(t, data)
	got, err := ZipH1(context.Background(), z)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := dirhash.HashZip(z, dirhash.Hash1); got != want {
		t.Errorf("h1 %s, dirhash says %s", got, want)
	}
}

// FuzzZipH1: for any zip dirhash can hash, ZipH1 gives the same h1: (it refuses only zips with a
// name twice).
func FuzzZipH1(f *testing.F) {
	f.Add(zipOf(f, zip.Store, "a", "x", "d/", ""))
	f.Add(zipOf(f, zip.Deflate, "a", "x", "d/b", "y"))
	f.Add(zipOf(f, zip.Store, "a", "1", "a", "2"))
	f.Add([]byte("not a zip"))
	f.Fuzz(func(t *testing.T, data []byte) {
		z := writeZip(t, data)
		want, werr := dirhash.HashZip(z, dirhash.Hash1)
		got, gerr := ZipH1(context.Background(), z)
		switch {
		case werr != nil:
		case gerr != nil && !strings.Contains(gerr.Error(), "appears twice"):
			t.Fatalf("dirhash hashed it (%s) but ZipH1 failed: %v", want, gerr)
		case gerr == nil && got != want:
			t.Fatalf("ZipH1 %s, dirhash %s", got, want)
		}
	})
}
