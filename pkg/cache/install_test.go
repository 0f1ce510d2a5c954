package cache

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
)

// installFixture is an empty cache and one package whose fetches are counted.
type installFixture struct {
	c       *Cache
	data    []byte
	pkg     *Package
	fetches atomic.Int32
	h1      string // what the zip's contents hash to
}

func newInstallFixture(t *testing.T) *installFixture {
	t.Helper()
	c, err := Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := &installFixture{c: c, data: makeZip(t, "the provider")}
	f.pkg = testPackage(f.data)
	fetch := f.pkg.Fetch
	f.pkg.Fetch = func(ctx context.Context, w io.Writer, _ oci.Progress) error {
		f.fetches.Add(1)
		return fetch(ctx, w, nil)
	}
	path := filepath.Join(t.TempDir(), "p.zip")
	os.WriteFile(path, f.data, 0o644)
	if f.h1, err = pkghash.ZipH1(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *installFixture) install(t *testing.T, judge Judge) *Installed {
	t.Helper()
	in, err := f.c.Install(context.Background(), f.pkg, judge, nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func vouchFor(want string) Judge {
	return func(h1 string) (bool, error) {
		if h1 != want {
			return false, errors.New("the lock does not record " + h1)
		}
		return true, nil
	}
}

func TestInstallUnpacksOnceAndChecksEveryUse(t *testing.T) {
	f := newInstallFixture(t)
	in := f.install(t, nil)
	if !in.Fetched || in.H1 != f.h1 || f.fetches.Load() != 1 {
		t.Fatalf("first install: fetched %v, h1 %s (want %s), %d fetches", in.Fetched, in.H1, f.h1, f.fetches.Load())
	}
	if got, err := os.ReadFile(in.Executable); err != nil || string(got) != "the provider" {
		t.Fatalf("executable %s: %q, %v", in.Executable, got, err)
	}
	if !strings.HasPrefix(in.Dir, in.Root) || filepath.Base(in.Dir) != "linux_amd64" {
		t.Errorf("package directory %s is not the platform's directory under %s", in.Dir, in.Root)
	}

	again := f.install(t, vouchFor(f.h1))
	if again.Fetched || again.Root != in.Root || f.fetches.Load() != 1 {
		t.Errorf("second install fetched again (%v, %d fetches) or moved (%s)", again.Fetched, f.fetches.Load(), again.Root)
	}

	// Vouched for by the judge, the unpacked files need no zip: a pruned zip is not fetched.
	os.Remove(f.c.blobPath(f.pkg.Zip))
	f.install(t, vouchFor(f.h1))
	if f.fetches.Load() != 1 {
		t.Errorf("a vouched-for package fetched its zip again")
	}
	// Not vouched for, the files are checked against the zip, fetched again for it.
	f.install(t, nil)
	if f.fetches.Load() != 2 {
		t.Errorf("an unvouched package was not checked against its zip (%d fetches)", f.fetches.Load())
	}
}

func TestInstallRefusesChangedFiles(t *testing.T) {
	for name, judge := range map[string]Judge{"vouched by a lock": vouchFor(""), "checked against the zip": nil} {
		t.Run(name, func(t *testing.T) {
			f := newInstallFixture(t)
			in := f.install(t, nil)
			if judge != nil {
				judge = vouchFor(in.H1)
			}
			os.Chmod(in.Executable, 0o755)
			if err := os.WriteFile(in.Executable, []byte("#!/bin/sh\ntouch pwned\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := f.c.Install(context.Background(), f.pkg, judge, nil)
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), in.Dir) || !strings.Contains(err.Error(), "oprov cache verify --fix") {
				t.Fatalf("a changed executable was not refused with its path and the fix: %v", err)
			}
		})
	}
}

func TestInstallRefusesALyingSource(t *testing.T) {
	f := newInstallFixture(t)
	f.pkg.H1 = "h1:Zm9yZ2VkIGJ5IHRoZSBpbmRleCBvZiBhIHJlLXNpZ25lZCByZWxlYXNlIQ=="
	_, err := f.c.Install(context.Background(), f.pkg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "does not describe its own package") {
		t.Fatalf("fresh unpack: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(f.c.Dir, "mirror")); len(entries) != 0 {
		t.Errorf("a refused package was left unpacked: %v", entries)
	}

	// Unpacked earlier under an honest statement, then stated otherwise: refused all the same.
	f.pkg.H1 = ""
	f.install(t, nil)
	f.pkg.H1 = "h1:Zm9yZ2VkIGJ5IHRoZSBpbmRleCBvZiBhIHJlLXNpZ25lZCByZWxlYXNlIQ=="
	if _, err := f.c.Install(context.Background(), f.pkg, vouchFor(f.h1), nil); err == nil || !strings.Contains(err.Error(), "does not describe its own package") {
		t.Fatalf("after an earlier unpack: %v", err)
	}
	if _, err := f.c.PutZip(context.Background(), f.pkg, true, nil); err == nil || !strings.Contains(err.Error(), "does not describe its own package") {
		t.Fatalf("PutZip with its h1: %v", err)
	}
}

func TestInstallPassesTheJudgesRefusalOn(t *testing.T) {
	f := newInstallFixture(t)
	refusal := errors.New("example.com/acme/hello 1.0.0: not in the lock")
	_, err := f.c.Install(context.Background(), f.pkg, func(string) (bool, error) { return false, refusal }, nil)
	if err != refusal {
		t.Fatalf("got %v, want the judge's own error", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(f.c.Dir, "mirror")); len(entries) != 0 {
		t.Errorf("a refused package was left unpacked: %v", entries)
	}
}

func TestPutZipChecksWhatItStoresAndHolds(t *testing.T) {
	ctx := context.Background()
	f := newInstallFixture(t)
	// A registry that serves other bytes than the digest names: nothing is kept.
	liar := *f.pkg
	liar.Fetch = func(_ context.Context, w io.Writer, _ oci.Progress) error {
		_, err := w.Write(makeZip(t, "other"))
		return err
	}
	if _, err := f.c.PutZip(ctx, &liar, false, nil); err == nil || f.c.HasZip(f.pkg.Zip) {
		t.Fatalf("wrong bytes: %v (kept: %v)", err, f.c.HasZip(f.pkg.Zip))
	}
	// Over the maximum package size: refused before any fetch.
	small := *f.pkg
	small.MaxSize = 10
	if _, err := f.c.PutZip(ctx, &small, false, nil); err == nil || f.fetches.Load() != 0 {
		t.Fatalf("over the size limit: %v, %d fetches", err, f.fetches.Load())
	}

	z, err := f.c.PutZip(ctx, f.pkg, true, nil)
	if err != nil || !z.Fetched || z.H1 != f.h1 {
		t.Fatalf("PutZip: %+v, %v", z, err)
	}
	// Changed on disk: a new Cache (a new command) re-hashes it and refuses it...
	os.Chmod(z.Path, 0o644)
	os.WriteFile(z.Path, []byte("tampered"), 0o644)
	c2, err := Open(f.c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.PutZip(ctx, f.pkg, false, nil); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a changed zip was not refused: %v", err)
	}
	// ...and with Repair fetches it again.
	c2.Repair = true
	z, err = c2.PutZip(ctx, f.pkg, false, nil)
	if err != nil || !z.Repaired || !z.Fetched {
		t.Fatalf("repair: %+v, %v", z, err)
	}
	if got, _ := sha256File(z.Path); got != f.pkg.Zip.Encoded() {
		t.Errorf("the repaired zip hashes to %s", got)
	}
}
