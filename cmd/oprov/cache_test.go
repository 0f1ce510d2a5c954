package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
)

// filledCache fetches hello 1.0.0 from a layout into a new cache, as 'oprov schema' does, and
// returns the cache directory.
func filledCache(t *testing.T) string {
	t.Helper()
	repo, _ := pushedLayout(t)
	dir := filepath.Join(t.TempDir(), "cache")
	c, err := cache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ref, err := oci.ParseRef(repo + ":1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := manifest.ParseProviderAddress("example.com/acme/hello")
	if _, err := loader.FetchRef(context.Background(), ref, addr, nil, loader.Options{Cache: c}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func cacheList(t *testing.T, dir string) *cache.Inventory {
	t.Helper()
	ios, out, _ := testIO()
	if err := runCacheList(context.Background(), &cacheOptions{io: ios, CacheDir: dir, output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	var inv cache.Inventory
	decodeJSON(t, out, &inv)
	return &inv
}

// TestCacheListVerifyPrune: list accounts for every byte on disk; verify passes a whole cache,
// names a damaged zip (exit 1, with the fix in the message), and --fix removes it; prune --all
// empties the cache.
func TestCacheListVerifyPrune(t *testing.T) {
	ctx := context.Background()
	dir := filledCache(t)
	inv := cacheList(t, dir)
	var onDisk int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			info, _ := d.Info()
			onDisk += info.Size()
		}
		return nil
	})
	kinds := map[string]int{}
	for _, e := range inv.Entries {
		kinds[e.Kind]++
	}
	if kinds["zip"] != 1 || kinds["unpacked"] != 1 || inv.Size != onDisk || inv.Temp.Size != 0 {
		t.Fatalf("list: kinds %v, size %d (disk %d), temp %d", kinds, inv.Size, onDisk, inv.Temp.Size)
	}
	ios, out, _ := testIO()
	if err := runCacheVerify(ctx, &cacheVerifyOptions{cacheOptions: cacheOptions{io: ios, CacheDir: dir, output: textOut}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "every one matches its digest") {
		t.Errorf("verify output: %q", out)
	}

	var zip cache.Entry
	for _, e := range inv.Entries {
		if e.Kind == "zip" {
			zip = e
		}
	}
	os.Chmod(zip.Path, 0o644)
	os.WriteFile(zip.Path, []byte("tampered"), 0o644)
	ios, out, _ = testIO()
	err := runCacheVerify(ctx, &cacheVerifyOptions{cacheOptions: cacheOptions{io: ios, CacheDir: dir, output: jsonOut}})
	wantErrorContaining(t, err, "1 damaged entry")
	wantErrorContaining(t, err, "oprov cache verify --fix")
	var res cache.VerifyResult
	decodeJSON(t, out, &res)
	if len(res.Problems) != 1 || res.Problems[0].Entry.Name != zip.Name || !strings.Contains(res.Problems[0].Error, "changed on disk") {
		t.Errorf("verify -o json problems: %+v", res.Problems)
	}
	ios, _, _ = testIO()
	if err := runCacheVerify(ctx, &cacheVerifyOptions{cacheOptions: cacheOptions{io: ios, CacheDir: dir, output: textOut}, Fix: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(zip.Path); !os.IsNotExist(err) {
		t.Errorf("--fix left the damaged zip: %v", err)
	}

	ios, out, _ = testIO()
	if err := runCachePrune(ctx, &cachePruneOptions{cacheOptions: cacheOptions{io: ios, CacheDir: dir, output: textOut}, All: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "Removed ") {
		t.Errorf("prune output: %q", out)
	}
	if inv := cacheList(t, dir); len(inv.Entries) != 0 || inv.Size != 0 {
		t.Errorf("after prune --all: %+v", inv)
	}
}

// TestCacheReportsTempSpace: a live run's temporary directory is reported with its process, and
// what a dead run left is cleared by the listing run and said so.
func TestCacheReportsTempSpace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	live, err := cache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	tmp, err := live.TmpDir()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tmp, "blob-1"), make([]byte, 2000), 0o644)
	dead := filepath.Join(dir, "tmp", scratch.Prefix+"4242-00000000000000aa")
	os.MkdirAll(dead, 0o700)
	os.WriteFile(dead+".lock", nil, 0o600)
	os.WriteFile(filepath.Join(dead, "blob-2"), make([]byte, 3000), 0o644)

	ios, out, _ := testIO()
	if err := runCacheList(context.Background(), &cacheOptions{io: ios, CacheDir: dir, output: textOut}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Temporary space: 2.0 kB",
		"being written by a live run, pid " + strconv.Itoa(os.Getpid()),
		"Cleared 3.0 kB of temporary files left by 1 run that ended without cleaning up.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("list output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead run's directory is still there")
	}
}

func TestCacheUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"cache", "nonsense"},
		{"cache", "prune", "--older-than", "0d"},
		{"cache", "prune", "--older-than", "soon"},
		{"cache", "verify", "-o", "yaml"},
	} {
		_, stderr, code := runCLI(t, append(args, "--cache-dir", t.TempDir())...)
		if code != exitUsage {
			t.Errorf("oprov %s: exit %d, want 2 (stderr %q)", strings.Join(args, " "), code, stderr)
		}
	}
}

// FuzzParseAge: an accepted age is positive and reads back from its own Go form; anything else
// is a usage error.
func FuzzParseAge(f *testing.F) {
	for _, s := range []string{"30d", "0.5d", "12h", "90m", "1h30m", "0d", "-1h", "d", "soon", "1e400d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseAge(s)
		if err != nil {
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("%q: %v is not a usage error", s, err)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("%q gave a non-positive age %v", s, d)
		}
		if again, err := parseAge(d.String()); err != nil || again != d {
			t.Fatalf("%q gave %v, which reads back as %v, %v", s, d, again, err)
		}
	})
}
