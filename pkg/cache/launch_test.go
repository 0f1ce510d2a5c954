package cache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cache another user could write is refused before anything in it is used, naming the path
// and the fix; so is a file of an entry that others could write.
func TestInstallRefusesACacheOthersCanWrite(t *testing.T) {
	f := newInstallFixture(t)
	in := f.install(t, vouchFor(f.h1))
	ctx := context.Background()
	for _, p := range []string{filepath.Join(f.c.Dir, "mirror"), filepath.Dir(in.Dir), in.Executable} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, st.Mode().Perm()|0o020)
		_, err = f.c.Install(ctx, f.pkg, vouchFor(f.h1), nil)
		os.Chmod(p, st.Mode().Perm())
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "chmod") || !strings.Contains(err.Error(), "go-w") {
			t.Errorf("%s writable by its group: %v", p, err)
		}
	}
	if _, err := f.c.Install(ctx, f.pkg, vouchFor(f.h1), nil); err != nil {
		t.Fatalf("once private again: %v", err)
	}
	// Above the cache: a shared directory is fine if sticky (as /tmp), not otherwise.
	above := filepath.Dir(f.c.Dir)
	st, _ := os.Stat(above)
	defer os.Chmod(above, st.Mode().Perm())
	os.Chmod(above, 0o777|os.ModeSticky)
	f.c = reopen(t, f.c) // the directories above a cache are checked once per Cache
	if _, err := f.c.Install(ctx, f.pkg, vouchFor(f.h1), nil); err != nil {
		t.Errorf("under a sticky shared directory: %v", err)
	}
	// Writable by its group: only if that is the user's own private group (umask 002).
	os.Chmod(above, 0o775)
	st2, _ := os.Stat(above)
	f.c = reopen(t, f.c)
	if _, err := f.c.Install(ctx, f.pkg, vouchFor(f.h1), nil); (err == nil) != ownGroup(st2) {
		t.Errorf("under a directory writable by its group (the user's own: %v): %v", ownGroup(st2), err)
	}
	os.Chmod(above, 0o777)
	f.c = reopen(t, f.c)
	if _, err := f.c.Install(ctx, f.pkg, vouchFor(f.h1), nil); err == nil || !strings.Contains(err.Error(), above) || !strings.Contains(err.Error(), "sticky") {
		t.Errorf("under a shared directory that is not sticky: %v", err)
	}
}

func reopen(t *testing.T, c *Cache) *Cache {
	t.Helper()
	c2, err := Open(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	return c2
}

// OpenExecutable gives the file checked, and refuses one put in its place since.
func TestOpenExecutableRefusesAFileSwappedAfterItsCheck(t *testing.T) {
	f := newInstallFixture(t)
	f.install(t, vouchFor(f.h1))
	in := f.install(t, vouchFor(f.h1))
	exe, err := in.OpenExecutable()
	if err != nil {
		t.Fatal(err)
	}
	exe.Close()
	data, _ := os.ReadFile(in.Executable)
	swap := filepath.Join(filepath.Dir(in.Dir), "swap")
	os.WriteFile(swap, data, 0o755) // even the same bytes: not the file checked
	if err := os.Rename(swap, in.Executable); err != nil {
		t.Fatal(err)
	}
	if f, err := in.OpenExecutable(); err == nil || !strings.Contains(err.Error(), "after its check") {
		if f != nil {
			f.Close()
		}
		t.Errorf("a swapped executable: %v", err)
	}
}
