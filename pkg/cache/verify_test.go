package cache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/oci"
)

func mustRepo(t *testing.T) oci.Ref {
	t.Helper()
	r, err := oci.ParseRef("127.0.0.1:5000/providers/acme/hello")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// overwrite changes a file in the cache as a user or a disk fault might.
func overwrite(t *testing.T, path, content string) {
	t.Helper()
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func problemKinds(ps []Problem) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		out[p.Entry.Kind] = p.Error
	}
	return out
}

// TestVerifyFindsEveryKindOfDamage: a whole cache verifies; a changed zip, record, unpacked file
// and build are each reported; --fix removes exactly them.
func TestVerifyFindsEveryKindOfDamage(t *testing.T) {
	f := fill(t)
	ctx := context.Background()
	res, err := f.c.Verify(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Checked != 5 || len(res.Problems) != 0 || len(res.Unchecked) != 0 {
		t.Fatalf("a whole cache: %+v", res)
	}
	overwrite(t, f.c.blobPath(f.orphan), "not the zip")
	overwrite(t, f.record, "{not json")
	pkg, _ := unpackedPackage(f.unpacked)
	overwrite(t, filepath.Join(pkg, "terraform-provider-hello_v1.0.0"), "changed")
	overwrite(t, filepath.Join(f.build, "terraform-provider-internal"), "changed")
	res, err = f.c.Verify(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := problemKinds(res.Problems)
	for kind, says := range map[string]string{kindZip: "changed on disk", kindVersion: "damaged", kindUnpacked: "changed on disk", kindBuild: "changed on disk"} {
		if !strings.Contains(got[kind], says) {
			t.Errorf("%s: reported %q, want it to say %q", kind, got[kind], says)
		}
	}
	if len(res.Problems) != 4 {
		t.Errorf("%d problems, want 4: %v", len(res.Problems), got)
	}
	res, err = f.c.Verify(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 4 {
		t.Errorf("--fix removed %d entries, want 4", len(res.Removed))
	}
	inv, _ := f.c.List()
	if len(inv.Entries) != 1 || inv.Entries[0].Name != f.zip.String() {
		t.Errorf("left after --fix: %+v", inv.Entries)
	}
}

// TestVerifyUnpackedAgainstWhatIsLeft: an unpacked package is checked against the h1: recorded
// when it was unpacked, even with its zip and version record gone; one unpacked before sums were
// recorded, against its version record's h1:, and reported as unchecked when that is gone too.
func TestVerifyUnpackedAgainstWhatIsLeft(t *testing.T) {
	f := fill(t)
	ctx := context.Background()
	pkg, _ := unpackedPackage(f.unpacked)
	os.Remove(f.c.blobPath(f.zip))
	os.Remove(f.record)
	if res, _ := f.c.Verify(ctx, false, nil); len(res.Problems) != 0 || len(res.Unchecked) != 0 {
		t.Fatalf("a whole package against its recorded sum: %+v", res)
	}
	overwrite(t, filepath.Join(pkg, "terraform-provider-hello_v1.0.0"), "changed")
	if res, _ := f.c.Verify(ctx, false, nil); len(res.Problems) != 1 {
		t.Errorf("a changed package against its recorded sum: %+v", res.Problems)
	}

	f = fill(t)
	pkg, _ = unpackedPackage(f.unpacked)
	os.Remove(filepath.Join(f.unpacked, unpackedSum)) // unpacked by an earlier oprov
	os.Remove(f.c.blobPath(f.zip))
	if res, _ := f.c.Verify(ctx, false, nil); len(res.Problems) != 0 || len(res.Unchecked) != 0 {
		t.Fatalf("a whole package against its version record: %+v", res)
	}
	overwrite(t, filepath.Join(pkg, "terraform-provider-hello_v1.0.0"), "changed")
	if res, _ := f.c.Verify(ctx, false, nil); len(res.Problems) != 1 {
		t.Errorf("a changed package against its version record: %+v", res.Problems)
	}
	os.Remove(f.record)
	if res, _ := f.c.Verify(ctx, false, nil); len(res.Unchecked) != 1 || len(res.Problems) != 0 {
		t.Errorf("with nothing to check against: %+v", res)
	}
}
