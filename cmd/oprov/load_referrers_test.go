package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oprov/oprov/pkg/oci"
)

// TestLoadRecreatesEachRepositorysReferrers: two repositories that hold the same version (so share
// its index digest) but were signed by different keys are saved into one tarball; load gives each
// exactly its own signature back, not the other's.
func TestLoadRecreatesEachRepositorysReferrers(t *testing.T) {
	ctx := context.Background()
	dist := packageHello(t)
	dir := t.TempDir()
	keys := map[string][2]string{}
	var refs []string
	for _, name := range []string{"alpha", "beta"} {
		repo := "oci-layout:" + filepath.Join(dir, name)
		ios, _, _ := testIO()
		if err := runPush(ctx, &pushOptions{io: ios, Sources: []string{dist}, Repo: repo, Concurrency: oci.DefaultConcurrency, output: textOut}); err != nil {
			t.Fatal(err)
		}
		key, pub := keyPair(t, name)
		keys[name] = [2]string{key, pub}
		signLayout(t, repo, key, false)
		refs = append(refs, repo+":1.0.0")
	}
	tarball := filepath.Join(t.TempDir(), "both.tar")
	ios, _, _ := testIO()
	if err := runSave(ctx, &saveOptions{io: ios, Refs: refs, Out: tarball, output: textOut}); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	if err := runLoad(ctx, &loadOptions{io: ios, File: tarball, To: "oci-layout:" + dest, output: textOut}); err != nil {
		t.Fatal(err)
	}
	for name, other := range map[string]string{"alpha": "beta", "beta": "alpha"} {
		loaded := "oci-layout:" + filepath.Join(dest, name) + ":1.0.0"
		if err := runVerify(ctx, &verifyOptions{io: ios, Ref: loaded, Keys: []string{keys[name][1]}, output: textOut}); err != nil {
			t.Errorf("%s lost its own signature: %v", name, err)
		}
		err := runVerify(ctx, &verifyOptions{io: ios, Ref: loaded, Keys: []string{keys[other][1]}, output: textOut})
		wantErrorContaining(t, err, "none by a trusted key")
		ios, out, _ := testIO()
		if err := runDiscover(ctx, &discoverOptions{io: ios, Ref: loaded, Depth: 1, output: jsonOut}); err != nil {
			t.Fatal(err)
		}
		var found struct{ Referrers []any }
		decodeJSON(t, out, &found)
		if len(found.Referrers) != 1 {
			t.Errorf("%s has %d referrers after load, want its 1: %s", name, len(found.Referrers), out)
		}
	}
}
