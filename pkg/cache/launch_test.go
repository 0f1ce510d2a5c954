//go:build linux

package cache

import (
	"context"
	"os"
	"os/user"
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

// TestOwnGroupNeedsNoOtherMembers: a group named as the user and primary to them is the user's
// private group only when no one else is in it: listed as a member, or having it as primary
// group. A list that cannot be read makes it not private.
func TestOwnGroupNeedsNoOtherMembers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(data), 0o644)
		return p
	}
	passwd := write("passwd", "alice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\n")
	for _, c := range []struct {
		group, passwd string
		private       bool
	}{
		{write("g1", "alice:x:1000:\n"), passwd, true},
		{write("g2", "alice:x:1000:alice\n"), passwd, true},
		{write("g3", "alice:x:1000:alice,bob\n"), passwd, false},
		{write("g4", "alice:x:1000:\nalias:x:1000:bob\n"), passwd, false},
		{write("g5", "alice:x:1000:\n"), write("p5", "alice:x:1000:1000::/:/bin/sh\nmallory:x:1002:1000::/:/bin/sh\n"), false},
		{filepath.Join(dir, "missing"), passwd, false},
	} {
		if got := privateGroup("alice", "1000", [2]string{c.group, c.passwd}); got != c.private {
			t.Errorf("%s, %s: private = %v", c.group, c.passwd, got)
		}
	}
	// ownGroup itself consults the lists: a group with another member is not the user's own.
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	old := groupFiles
	t.Cleanup(func() { groupFiles = old })
	groupFiles = [2]string{write("g6", u.Username+":x:"+u.Gid+":"+u.Username+",intruder\n"), passwd}
	if ownGroup(st) {
		t.Error("a group with another member is taken for the user's private group")
	}
}
