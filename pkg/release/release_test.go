package release

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/pkghash"
)

func TestParseFilename(t *testing.T) {
	got, err := ParseFilename("terraform-provider-my-api_1.2.0-rc.1_linux_arm64.zip")
	want := Filename{Type: "my-api", Version: "1.2.0-rc.1", Platform: manifest.Platform{OS: "linux", Arch: "arm64"}}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got.String() != "terraform-provider-my-api_1.2.0-rc.1_linux_arm64.zip" {
		t.Errorf("String() = %s", got)
	}
	for _, bad := range []string{
		"hello.zip", "terraform-provider-x_1.0.0_linux.zip", "terraform-provider-x_1.0.0_linux_amd64.tar.gz",
		"terraform-provider-X_1.0.0_linux_amd64.zip", "terraform-provider-x_v1.0.0_linux_amd64.zip",
		"terraform-provider-x_1.0.0_linux_amd64_v8.zip", "terraform-provider-_1.0.0_linux_amd64.zip",
	} {
		if _, err := ParseFilename(bad); err == nil {
			t.Errorf("ParseFilename(%q) accepted it", bad)
		}
	}
}

func TestParseSums(t *testing.T) {
	in := "ab" + strings.Repeat("0", 62) + "  a.zip\n\n" + strings.Repeat("1", 64) + " *b.zip\r\n"
	s, err := ParseSums(strings.NewReader(in))
	if err != nil || len(s) != 2 || s["b.zip"] != strings.Repeat("1", 64) {
		t.Fatalf("got %v, %v", s, err)
	}
	back, err := ParseSums(bytes.NewReader(s.Bytes()))
	if err != nil || len(back) != 2 || back["a.zip"] != s["a.zip"] {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	for _, bad := range []string{"nohash", "abc  a.zip", strings.Repeat("g", 64) + "  a.zip", strings.Repeat("1", 64) + "  ../a.zip",
		strings.Repeat("1", 64) + "  a.zip\n" + strings.Repeat("2", 64) + "  a.zip"} {
		if _, err := ParseSums(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseSums(%q) accepted it", bad)
		}
	}
}

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

func TestPackageBinariesAndCollect(t *testing.T) {
	bin := t.TempDir()
	for _, p := range []string{"linux_amd64", "windows_amd64"} {
		exe := "terraform-provider-demo"
		if strings.HasPrefix(p, "windows") {
			exe += ".exe"
		}
		os.MkdirAll(filepath.Join(bin, p), 0o755)
		os.WriteFile(filepath.Join(bin, p, exe), []byte("binary for "+p), 0o755)
		os.WriteFile(filepath.Join(bin, p, "LICENSE"), []byte("MIT"), 0o644)
	}
	out := t.TempDir()
	p, err := PackageBinaries(bin, PackageOptions{Type: "demo", Version: "0.1.0", OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Release.Artifacts) != 2 {
		t.Fatalf("artifacts: %+v", p.Release.Artifacts)
	}
	rel, err := Collect(context.Background(), []string{out})
	if err != nil {
		t.Fatal(err)
	}
	if rel.Type != "demo" || rel.Version != "0.1.0" || rel.SumsPath == "" || len(rel.Artifacts) != 2 {
		t.Fatalf("collected %+v", rel)
	}
	for i, a := range rel.Artifacts {
		if a.Digest != p.Release.Artifacts[i].Digest || a.H1 != p.Hashes[a.Name.Platform].H1 {
			t.Errorf("%s: collect hashed %s %s, package wrote %s %s", a.Name, a.Digest, a.H1, p.Release.Artifacts[i].Digest, p.Hashes[a.Name.Platform].H1)
		}
		h, err := pkghash.File(a.Path)
		if err != nil || h != p.Hashes[a.Name.Platform] {
			t.Errorf("%s: pkghash.File %+v, package printed %+v (%v)", a.Name, h, p.Hashes[a.Name.Platform], err)
		}
	}
	if rel.Artifacts[1].Executable != "terraform-provider-demo_v0.1.0.exe" {
		t.Errorf("windows executable: %q", rel.Artifacts[1].Executable)
	}
	// Packaging again gives identical bytes.
	out2 := t.TempDir()
	p2, err := PackageBinaries(bin, PackageOptions{Type: "demo", Version: "0.1.0", OutDir: out2})
	if err != nil || p2.Release.Artifacts[0].Digest != p.Release.Artifacts[0].Digest {
		t.Errorf("repackaging changed the digest (%v)", err)
	}
	// The SHA256SUMS file alone names the release.
	rel2, err := Collect(context.Background(), []string{rel.SumsPath})
	if err != nil || len(rel2.Artifacts) != 2 {
		t.Errorf("collect from SHA256SUMS: %+v, %v", rel2, err)
	}
	// An interrupted command stops hashing.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Collect(done, []string{out}); !errors.Is(err, context.Canceled) {
		t.Errorf("collect with its context done: %v", err)
	}
	// Nothing but the outputs is left behind: no temporary files.
	entries, _ := os.ReadDir(out)
	if len(entries) != 3 {
		t.Errorf("output directory holds %d entries, want 2 zips and SHA256SUMS", len(entries))
	}
}
