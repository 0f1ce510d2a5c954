package providerrelease

import (
	"archive/zip"
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestWriteZipIsDeterministic(t *testing.T) {
	files := []ZipFile{
		{Name: "z-extra.txt", Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }},
		{Name: "terraform-provider-x_v1.0.0", Executable: true, Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("bin")), nil }},
	}
	var a, b bytes.Buffer
	if err := WriteZip(&a, files); err != nil {
		t.Fatal(err)
	}
	if err := WriteZip(&b, []ZipFile{files[1], files[0]}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same files in another order gave different zips")
	}
	zr, err := zip.NewReader(bytes.NewReader(a.Bytes()), int64(a.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if zr.File[0].Name != "terraform-provider-x_v1.0.0" || zr.File[0].Mode().Perm() != 0o755 || zr.File[1].Mode().Perm() != 0o644 {
		t.Errorf("entries: %s %v, %s %v", zr.File[0].Name, zr.File[0].Mode(), zr.File[1].Name, zr.File[1].Mode())
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var c bytes.Buffer
	WriteZip(&c, files)
	if bytes.Equal(a.Bytes(), c.Bytes()) {
		t.Error("SOURCE_DATE_EPOCH did not change the zip's times")
	}
	zr, _ = zip.NewReader(bytes.NewReader(c.Bytes()), int64(c.Len()))
	if got := zr.File[0].Modified.Unix(); got != 1700000000 {
		t.Errorf("mtime %d, want SOURCE_DATE_EPOCH", got)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if err := WriteZip(io.Discard, files); err == nil {
		t.Error("a bad SOURCE_DATE_EPOCH was accepted")
	}
}
