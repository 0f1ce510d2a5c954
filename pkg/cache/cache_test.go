package cache

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// mustTmp gives c's own temporary directory.
func mustTmp(t *testing.T, c *Cache) string {
	t.Helper()
	d, err := c.TmpDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// makeZip gives the bytes of a provider zip holding one executable with the given content.
func makeZip(t *testing.T, content string) []byte {
	t.Helper()
	var b bytes.Buffer
	err := providerrelease.WriteZip(&b, []providerrelease.ZipFile{{Name: "terraform-provider-hello_v1.0.0", Executable: true,
		Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(content)), nil }}})
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var (
	helloAddr, _ = manifest.ParseProviderAddress("example.com/acme/hello")
	linuxAMD64   = manifest.Platform{OS: "linux", Arch: "amd64"}
)

// testPackage is a package of example.com/acme/hello 1.0.0 for linux_amd64 whose zip is data.
func testPackage(data []byte) *Package {
	return &Package{Addr: helloAddr, Version: "1.0.0", Platform: linuxAMD64, Filename: "terraform-provider-hello_1.0.0_linux_amd64.zip",
		Zip: digest.FromBytes(data), Size: int64(len(data)),
		Fetch: func(_ context.Context, w io.Writer, _ oci.Progress) error { _, err := w.Write(data); return err }}
}

func putZip(t *testing.T, c *Cache, data []byte) digest.Digest {
	t.Helper()
	pkg := testPackage(data)
	if _, err := c.PutZip(context.Background(), pkg, false, nil); err != nil {
		t.Fatal(err)
	}
	return pkg.Zip
}

// filled is a cache holding one version (its record, its zip, the zip unpacked), a zip no
// version lists, and a build.
type filled struct {
	c                       *Cache
	zip, orphan             digest.Digest
	record, unpacked, build string
}

func fill(t *testing.T) *filled {
	t.Helper()
	c, err := Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := &filled{c: c, zip: putZip(t, c, makeZip(t, "hello")), orphan: putZip(t, c, makeZip(t, "republished"))}
	h1, err := pkghash.ZipH1(context.Background(), c.blobPath(f.zip))
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := oci.ParseRef("127.0.0.1:5000/providers/acme/hello")
	meta := &VersionMeta{Repository: repo.Repo(), Tag: "1.0.0", Version: "1.0.0", Index: digest.FromString("index"),
		Platforms: map[string]*PlatformMeta{"linux_amd64": {Manifest: digest.FromString("manifest"), Zip: f.zip, H1: h1},
			"darwin_arm64": {Manifest: digest.FromString("not fetched yet")}}}
	if err := c.WriteMeta(repo, meta); err != nil {
		t.Fatal(err)
	}
	f.record = c.metaPath(repo, "1.0.0")
	in, err := c.Install(context.Background(), testPackage(makeZip(t, "hello")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.unpacked = in.Root
	// A build, made as BuildGo makes one: in the temporary directory, sealed, renamed in.
	tmp, _ := os.MkdirTemp(mustTmp(t, c), "build-")
	os.WriteFile(filepath.Join(tmp, "terraform-provider-internal"), []byte("#!/bin/sh\n"), 0o755)
	if err := sealDir(tmp); err != nil {
		t.Fatal(err)
	}
	f.build = filepath.Join(c.Dir, "builds", strings.Repeat("ab", 32))
	os.MkdirAll(filepath.Dir(f.build), 0o755)
	if err := os.Rename(tmp, f.build); err != nil {
		t.Fatal(err)
	}
	return f
}

// diskUsage adds up the regular files under dir.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			info, _ := d.Info()
			n += info.Size()
		}
		return nil
	})
	return n
}

// TestListAccountsForEveryByte: the entries' sizes add up to the cache's size on disk, and each
// kind is named as a user knows it.
func TestListAccountsForEveryByte(t *testing.T) {
	f := fill(t)
	inv, err := f.c.List()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	var sum int64
	for _, e := range inv.Entries {
		kinds[e.Kind] = append(kinds[e.Kind], e.Name)
		sum += e.Size
	}
	if len(kinds[kindZip]) != 2 || len(kinds[kindVersion]) != 1 || len(kinds[kindUnpacked]) != 1 || len(kinds[kindBuild]) != 1 {
		t.Errorf("entries by kind: %v", kinds)
	}
	if got := kinds[kindVersion]; len(got) == 1 && got[0] != "127.0.0.1:5000/providers/acme/hello:1.0.0" {
		t.Errorf("version named %q", got[0])
	}
	if got := kinds[kindUnpacked]; len(got) == 1 && got[0] != "example.com/acme/hello 1.0.0 linux_amd64" {
		t.Errorf("unpacked package named %q", got[0])
	}
	if disk := diskUsage(t, f.c.Dir); sum != inv.Size || disk != inv.Size {
		t.Errorf("entries add up to %d, the inventory says %d, the disk holds %d", sum, inv.Size, disk)
	}
	if inv.Temp.Size != 0 || len(inv.Temp.Owners) != 0 {
		t.Errorf("temporary space after the writes: %+v", inv.Temp)
	}
}

// TestOpenSweepsWhatDeadRunsLeft: opening the cache removes dead owners' directories at once and
// unowned files once an hour old, and leaves a live Cache's work alone.
func TestOpenSweepsWhatDeadRunsLeft(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	live, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	os.WriteFile(filepath.Join(mustTmp(t, live), "blob-downloading"), make([]byte, 1000), 0o644)
	// A dead owner: its lock file is there, and nobody holds it.
	dead := filepath.Join(dir, "tmp", scratch.Prefix+"99999-00000000000000dd")
	os.MkdirAll(dead, 0o700)
	os.WriteFile(dead+".lock", nil, 0o600)
	os.WriteFile(filepath.Join(dead, "blob-partial"), make([]byte, 300), 0o644)
	old, young := filepath.Join(dir, "tmp", "blob-old"), filepath.Join(dir, "tmp", "blob-young")
	os.WriteFile(old, make([]byte, 20), 0o644)
	os.WriteFile(young, make([]byte, 5), 0o644)
	long := time.Now().Add(-2 * UnownedTempAge)
	os.Chtimes(old, long, long)

	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Swept(); s.Owners != 2 || s.Bytes != 320 {
		t.Errorf("Open swept %+v, want the dead owner and the old unowned file (320 bytes)", s)
	}
	if st, err := os.Stat(filepath.Join(mustTmp(t, live), "blob-downloading")); err != nil || st.Size() != 1000 {
		t.Fatalf("the live Cache's download was touched: %v", err)
	}
	inv, _ := c.List()
	if len(inv.Temp.Owners) != 1 || !inv.Temp.Owners[0].Live || inv.Temp.Owners[0].Size != 1000 || len(inv.Temp.Unowned) != 1 {
		t.Errorf("temporary space: %+v", inv.Temp)
	}
	c.Close()
	live.Close()
	left, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	if len(left) != 1 || left[0].Name() != "blob-young" {
		t.Errorf("left in tmp/ after both closed: %v", left)
	}
}

// A relative cache directory is made absolute: its paths are written into files read from
// other directories (the CLI configuration, links in .terraform/providers).
func TestOpenMakesTheDirectoryAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := Open("rel-cache")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !filepath.IsAbs(c.Dir) || filepath.Base(c.Dir) != "rel-cache" {
		t.Errorf("Dir = %q, want an absolute path ending in rel-cache", c.Dir)
	}
}
