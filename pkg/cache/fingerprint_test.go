//go:build linux

package cache

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fingerprintedH1 is the h1: fingerprinted gives, or "".
func (c *Cache) fingerprintedH1(root, dir string) string {
	h1, _ := c.fingerprinted(root, dir)
	return h1
}

func TestFingerprintSkipsTheHashOnlyWhileNothingChanged(t *testing.T) {
	t.Setenv("OPROV_STATE_DIR", t.TempDir())
	f := newInstallFixture(t)
	in := f.install(t, vouchFor(f.h1)) // unpacks: hashed while unpacking, not yet fingerprinted
	if _, err := os.Stat(filepath.Join(in.Root, fingerprintFile)); err == nil {
		t.Fatal("a fingerprint was recorded at unpack time")
	}
	f.install(t, vouchFor(f.h1)) // hashes, and records the fingerprint
	if f.c.fingerprintedH1(in.Root, in.Dir) != f.h1 {
		t.Fatal("no fingerprint recorded after a checked hash")
	}
	// A file changed, and its mtime set back: refused (ctime moved).
	exe := in.Executable
	st, _ := os.Stat(exe)
	os.Chmod(exe, 0o755)
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(exe, st.ModTime(), st.ModTime())
	if h := f.c.fingerprintedH1(in.Root, in.Dir); h != "" {
		t.Fatal("a changed file passed the fingerprint")
	}
	if _, err := f.c.Install(context.Background(), f.pkg, vouchFor(f.h1), nil); err == nil || !strings.Contains(err.Error(), "changed on disk") {
		t.Fatalf("a changed file with its mtime set back: %v", err)
	}
}

func TestFingerprintRecordsAreBoundToTheKeyAndTheFiles(t *testing.T) {
	t.Setenv("OPROV_STATE_DIR", t.TempDir())
	f := newInstallFixture(t)
	in := f.install(t, vouchFor(f.h1))
	f.install(t, vouchFor(f.h1))
	rec := filepath.Join(in.Root, fingerprintFile)
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	// A record claiming another h1: fails its MAC.
	forged := strings.Replace(string(data), f.h1, "h1:AAAA", 1)
	os.WriteFile(rec, []byte(forged), 0o644)
	if f.c.fingerprintedH1(in.Root, in.Dir) != "" {
		t.Fatal("a forged record passed")
	}
	// A new file beside the package: not as fingerprinted.
	os.WriteFile(rec, data, 0o644)
	if f.c.fingerprintedH1(in.Root, in.Dir) != f.h1 {
		t.Fatal("the genuine record no longer passes")
	}
	os.WriteFile(filepath.Join(in.Dir, "extra"), []byte("x"), 0o644)
	if f.c.fingerprintedH1(in.Root, in.Dir) != "" {
		t.Fatal("an added file passed")
	}
}

func TestFingerprintKeyMustBeTheUsersAlone(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "fingerprint.key"), []byte(strings.Repeat("ab", 32)), 0o644)
	if readOwnKey(filepath.Join(dir, "fingerprint.key")) != nil {
		t.Error("a key others can read was used")
	}
	os.Chmod(filepath.Join(dir, "fingerprint.key"), 0o600)
	if readOwnKey(filepath.Join(dir, "fingerprint.key")) == nil {
		t.Error("the user's own 0600 key was refused")
	}
	os.Symlink(filepath.Join(dir, "fingerprint.key"), filepath.Join(dir, "link.key"))
	if readOwnKey(filepath.Join(dir, "link.key")) != nil {
		t.Error("a key reached through a link was used")
	}
}

// A cache copied with cp -a to a new place (a CI cache restored, say) is hashed once there.
func TestFingerprintOfACopiedCacheIsHashedOnce(t *testing.T) {
	t.Setenv("OPROV_STATE_DIR", t.TempDir())
	f := newInstallFixture(t)
	in := f.install(t, vouchFor(f.h1))
	f.install(t, vouchFor(f.h1))
	copyDir := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", f.c.Dir, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	c2, err := Open(copyDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	root2 := filepath.Join(copyDir, "mirror", filepath.Base(in.Root))
	dir2 := filepath.Join(root2, strings.TrimPrefix(in.Dir, in.Root))
	if c2.fingerprintedH1(root2, dir2) != "" {
		t.Fatal("a copied cache's fingerprint passed without a hash")
	}
	if _, err := c2.Install(context.Background(), f.pkg, vouchFor(f.h1), nil); err != nil {
		t.Fatal(err)
	}
	if c2.fingerprintedH1(root2, dir2) != f.h1 {
		t.Fatal("the copy was not fingerprinted after its one hash")
	}
}
