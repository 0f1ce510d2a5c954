package cache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func removedNames(res *PruneResult) map[string]bool {
	out := map[string]bool{}
	for _, e := range res.Removed {
		out[e.Kind+" "+e.Name] = true
	}
	return out
}

// TestPruneByLastUse: --older-than removes what was not used lately, and a use (here through
// PutBlob and ReadMeta) keeps an entry.
func TestPruneByLastUse(t *testing.T) {
	f := fill(t)
	long := time.Now().Add(-40 * 24 * time.Hour)
	for _, p := range []string{f.c.blobPath(f.zip), f.c.blobPath(f.orphan), f.record, f.unpacked, f.build} {
		os.Chtimes(p, long, long)
	}
	// Used again just now: the zip (a PutBlob that finds it) and the record (a read).
	putZip(t, f.c, makeZip(t, "hello"))
	meta, err := f.c.ReadMeta(mustRepo(t), "1.0.0")
	if err != nil || meta == nil {
		t.Fatalf("ReadMeta: %v, %v", meta, err)
	}
	res, err := f.c.Prune(context.Background(), PruneOptions{OlderThan: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	got := removedNames(res)
	want := []string{"zip " + f.orphan.String(), "unpacked example.com/acme/hello 1.0.0 linux_amd64"}
	if len(got) != 3 || !got[want[0]] || !got[want[1]] {
		t.Errorf("removed %v, want %v and the build", got, want)
	}
	for _, p := range []string{f.c.blobPath(f.orphan), f.unpacked, f.build} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range []string{f.c.blobPath(f.zip), f.record} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s, used just now, was removed", p)
		}
	}
	if left, _ := os.ReadDir(mustTmp(t, f.c)); len(left) != 0 {
		t.Errorf("pruning left %d files in its temporary directory", len(left))
	}
}

// TestPruneUnused: --unused removes the zip no version lists, and nothing a version lists; a dry
// run removes nothing; --all removes everything.
func TestPruneUnused(t *testing.T) {
	f := fill(t)
	ctx := context.Background()
	dry, err := f.c.Prune(ctx, PruneOptions{Unused: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := removedNames(dry); len(got) != 1 || !got["zip "+f.orphan.String()] {
		t.Errorf("dry run would remove %v, want only the orphan zip", got)
	}
	if _, err := os.Stat(f.c.blobPath(f.orphan)); err != nil {
		t.Errorf("a dry run removed the orphan zip")
	}
	if _, err := f.c.Prune(ctx, PruneOptions{Unused: true}); err != nil {
		t.Fatal(err)
	}
	inv, _ := f.c.List()
	if len(inv.Entries) != 4 {
		t.Errorf("%d entries left after --unused, want 4", len(inv.Entries))
	}
	// With the version record gone, its zip and unpacked package are unused too.
	os.Remove(f.record)
	res, err := f.c.Prune(ctx, PruneOptions{Unused: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 2 {
		t.Errorf("removed %v, want the zip and its unpacked package", removedNames(res))
	}
	if _, err := f.c.Prune(ctx, PruneOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	inv, _ = f.c.List()
	if len(inv.Entries) != 0 || inv.Size != 0 || diskUsage(t, f.c.Dir) != 0 {
		t.Errorf("after --all: %d entries, %d bytes", len(inv.Entries), diskUsage(t, f.c.Dir))
	}
}

// TestPruneWaitsForWriters: an entry is removed under its writers' lock, so a prune never takes
// away an entry while a writer holds it.
func TestPruneWaitsForWriters(t *testing.T) {
	f := fill(t)
	unlock, err := f.c.lock(context.Background(), "blob-"+f.orphan.Encoded())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = f.c.Prune(ctx, PruneOptions{Unused: true})
	if err == nil || !strings.Contains(err.Error(), "locking the cache") {
		t.Errorf("prune while the zip's lock is held: %v", err)
	}
	if _, err := os.Stat(f.c.blobPath(f.orphan)); err != nil {
		t.Errorf("the locked zip was removed")
	}
	unlock()
	if _, err := f.c.Prune(context.Background(), PruneOptions{Unused: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.c.blobPath(f.orphan))); !os.IsNotExist(err) {
		t.Errorf("the zip is still there once unlocked")
	}
}
