package unzip

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/oprov/oprov/pkg/pkghash"
)

type entry struct {
	name   string
	body   []byte
	mode   os.FileMode
	method uint16
}

func buildZip(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: e.method}
		if e.mode != 0 {
			h.SetMode(e.mode)
		} else {
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.body)
	}
	zw.Close()
	return buf.Bytes()
}

func writeZipFile(t testing.TB, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "p.zip")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExtractGood(t *testing.T) {
	z := writeZipFile(t, buildZip(t, []entry{
		{name: "terraform-provider-x_v1.0.0", body: []byte("bin"), mode: 0o755},
		{name: "docs/", mode: os.ModeDir | 0o755},
		{name: "docs/README.md", body: []byte("hi"), mode: 0o600},
	}))
	dest := filepath.Join(t.TempDir(), "out")
	if err := extract(context.Background(), z, dest, DefaultLimits, nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dest, "terraform-provider-x_v1.0.0"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("executable: %v %v", st.Mode(), err)
	}
	st, err = os.Stat(filepath.Join(dest, "docs", "README.md"))
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("readme: %v %v", st.Mode(), err)
	}
	// The destination must not exist yet: a second extraction fails without touching it.
	if err := extract(context.Background(), z, dest, DefaultLimits, nil); err == nil {
		t.Error("extracting over an existing directory succeeded")
	}
}

func TestExtractRefuses(t *testing.T) {
	bomb := bytes.Repeat([]byte{0}, 50<<20)
	cases := map[string]struct {
		entries []entry
		limits  Limits
		want    string
	}{
		"path traversal":    {entries: []entry{{name: "../evil", body: []byte("x")}}, want: "path traversal"},
		"deep traversal":    {entries: []entry{{name: "a/../../evil", body: []byte("x")}}, want: "path traversal"},
		"absolute path":     {entries: []entry{{name: "/etc/evil", body: []byte("x")}}, want: "absolute path"},
		"windows absolute":  {entries: []entry{{name: "C:/evil", body: []byte("x")}}, want: "absolute path"},
		"backslash":         {entries: []entry{{name: `..\evil`, body: []byte("x")}}, want: "backslash"},
		"symlink":           {entries: []entry{{name: "link", body: []byte("/etc/passwd"), mode: os.ModeSymlink | 0o777}}, want: "symbolic link"},
		"duplicate":         {entries: []entry{{name: "a", body: []byte("1")}, {name: "a", body: []byte("2")}}, want: "appears twice"},
		"duplicate by case": {entries: []entry{{name: "A", body: []byte("1")}, {name: "a", body: []byte("2")}}, want: "appears twice"},
		"file and dir":      {entries: []entry{{name: "a", body: []byte("1")}, {name: "a/b", body: []byte("2")}}, want: "both a file and a directory"},
		"zip bomb (ratio)":  {entries: []entry{{name: "bomb", body: bomb, method: zip.Deflate}}, limits: DefaultLimits, want: "zip bomb"},
		"zip bomb (total)": {entries: []entry{{name: "a", body: bytes.Repeat([]byte("x"), 3000)}, {name: "b", body: bytes.Repeat([]byte("y"), 3000)}},
			limits: Limits{MaxTotal: 5000, MaxFiles: 10, MaxRatio: 1000}, want: "over the limit"},
		"too many files": {entries: []entry{{name: "a"}, {name: "b"}, {name: "c"}}, limits: Limits{MaxTotal: 1 << 20, MaxFiles: 2, MaxRatio: 100}, want: "3 entries"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			limits := tc.limits
			if limits.MaxTotal == 0 {
				limits = DefaultLimits
			}
			z := writeZipFile(t, buildZip(t, tc.entries))
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			err := extract(context.Background(), z, dest, limits, nil)
			if err == nil || !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want an unsafe-archive error containing %q", err, tc.want)
			}
			left, _ := os.ReadDir(parent)
			if len(left) != 0 {
				t.Errorf("a refused archive left %d entries behind", len(left))
			}
		})
	}
}

// FuzzExtract: whatever the bytes, Extract never panics, never writes outside its destination, and
// either creates the destination whole or leaves nothing.
func FuzzExtract(f *testing.F) {
	f.Add(buildZip(f, []entry{{name: "terraform-provider-x", body: []byte("bin"), mode: 0o755}}))
	f.Add(buildZip(f, []entry{{name: "../x", body: []byte("1")}}))
	f.Add(buildZip(f, []entry{{name: "d/", mode: os.ModeDir | 0o755}, {name: "d/f", body: []byte("2"), method: zip.Deflate}}))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		z := filepath.Join(root, "in.zip")
		os.WriteFile(z, data, 0o644)
		parent := filepath.Join(root, "parent")
		os.Mkdir(parent, 0o755)
		dest := filepath.Join(parent, "out")
		err := extract(context.Background(), z, dest, Limits{MaxTotal: 1 << 20, MaxFiles: 100, MaxRatio: 100}, nil)
		entries, _ := os.ReadDir(parent)
		if err != nil && len(entries) != 0 {
			t.Fatalf("failed extraction left %v", entries)
		}
		if err == nil && (len(entries) != 1 || entries[0].Name() != "out") {
			t.Fatalf("extraction left %v", entries)
		}
		// Nothing may appear beside parent.
		top, _ := os.ReadDir(root)
		if len(top) != 2 {
			t.Fatalf("extraction wrote outside its destination: %v", top)
		}
		filepath.WalkDir(parent, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&os.ModeSymlink != 0 {
				t.Fatalf("extraction created a symlink %s", p)
			}
			return nil
		})
	})
}

// TestExtractH1: the h1: hash computed while unpacking, and pkghash.ZipH1's, equal dirhash's
// (directory entries included), and a check that refuses it leaves nothing behind.
func TestExtractH1(t *testing.T) {
	z := writeZipFile(t, buildZip(t, []entry{
		{name: "terraform-provider-x_v1.0.0", body: bytes.Repeat([]byte("bin"), 1000), mode: 0o755, method: zip.Deflate},
		{name: "docs/", mode: os.ModeDir | 0o755},
		{name: "docs/README.md", body: []byte("hi")},
	}))
	want, err := dirhash.HashZip(z, dirhash.Hash1) // what OpenTofu computes for a zip
	if err != nil {
		t.Fatal(err)
	}
	if mine, err := pkghash.ZipH1(context.Background(), z); err != nil || mine != want {
		t.Errorf("pkghash.ZipH1 = %s, %v; dirhash says %s", mine, err, want)
	}
	parent := t.TempDir()
	var got string
	if err := extract(context.Background(), z, filepath.Join(parent, "ok"), DefaultLimits, func(h1 string) error { got = h1; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("h1 while unpacking %s, pkghash.ZipH1 %s", got, want)
	}
	refused := errors.New("refused")
	err = extract(context.Background(), z, filepath.Join(parent, "no"), DefaultLimits, func(string) error { return refused })
	if !errors.Is(err, refused) {
		t.Errorf("the check's error was not returned: %v", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("a refused extraction left %d entries beside the good one", len(entries)-1)
	}
}

func TestCheckEntryPath(t *testing.T) {
	for _, ok := range []string{"a", "dir/b.txt", "a..b"} {
		if err := CheckEntryPath(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../a", "a/../../b", "/etc/passwd", `a\b`, "C:/x"} {
		if err := CheckEntryPath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// extract is ExtractIn on a root at dest's parent (the way the tests unpack a zip to a path).
func extract(ctx context.Context, zipPath, dest string, limits Limits, check func(h1 string) error) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(filepath.Dir(dest))
	if err != nil {
		return err
	}
	defer root.Close()
	return ExtractIn(ctx, zipPath, root, filepath.Base(dest), limits, check)
}
