package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/tests/testkit/peers"
)

// poisonCachedExecutable replaces the one unpacked executable of a cache with a script that, if it
// is ever started, leaves a marker file; it returns the marker's path.
func poisonCachedExecutable(t *testing.T, cache string) string {
	t.Helper()
	exes, _ := filepath.Glob(filepath.Join(cache, "mirror", "*", "*", "*", "*", "*", "*", "terraform-provider-hello*"))
	if len(exes) != 1 {
		t.Fatalf("want one unpacked executable in the cache, found %v", exes)
	}
	marker := filepath.Join(t.TempDir(), "the-poisoned-provider-ran")
	os.Chmod(exes[0], 0o755)
	if err := os.WriteFile(exes[0], []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return marker
}

func assertNotRun(t *testing.T, marker, what string) {
	t.Helper()
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("%s started the replaced executable", what)
		os.Remove(marker)
	}
}

// TestTamperedCacheNeverRuns: an installed, signed provider whose cached executable is replaced
// afterwards (a CI cache restored from elsewhere, say) is refused by install, run and schema, each
// naming the file and the fix; the replaced bytes never start; install never says "verified" for
// them; after the fix, install works again.
func TestTamperedCacheNeverRuns(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig)
	if r := mustOprov(t, f.env, "install", "-C", f.cfg); !strings.Contains(r.Stdout, "signature verified") {
		t.Fatalf("the untampered install does not say it verified the signature, so the check below proves nothing:\n%s", r.Stdout)
	}
	marker := poisonCachedExecutable(t, f.cache)

	r := oprov(t, f.env, "install", "-C", f.freshCopy(t))
	if r.Code == 0 || strings.Contains(r.Stdout, "verified") || !strings.Contains(r.Stderr, "was changed on disk") || !strings.Contains(r.Stderr, "oprov cache verify --fix") {
		t.Errorf("install of a tampered cache: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = oprov(t, append(f.env, "OPROV_TOFU="+tofu), "run", "-C", f.freshCopy(t), "--", tofu, "plan", "-input=false")
	if r.Code == 0 || !strings.Contains(r.Stderr, "was changed on disk") {
		t.Errorf("run from a tampered cache: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	assertNotRun(t, marker, "oprov run")
	// schema by reference has no lock: the unpacked files are checked against the verified zip.
	r = oprov(t, f.env, "schema", f.repo+":1.0.0", "--address", "example.com/acme/hello", "--key", filepath.Join(f.keys, "cosign.pub"))
	if r.Code == 0 || !strings.Contains(r.Stderr, "was changed on disk") {
		t.Errorf("schema from a tampered cache: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	assertNotRun(t, marker, "oprov schema")

	mustOprov(t, f.env, "cache", "verify", "--fix")
	if r := mustOprov(t, f.env, "install", "-C", f.freshCopy(t)); !strings.Contains(r.Stdout, "signature verified") {
		t.Errorf("install after 'cache verify --fix':\n%s", r.Stdout)
	}
}

// TestLyingH1AfterAnEarlierUnpack: a version unpacked honestly, then re-signed with an index whose
// dev.oprov.h1 for this machine lies, is refused by install and schema although the cache already
// holds the package unpacked.
func TestLyingH1AfterAnEarlierUnpack(t *testing.T) {
	f := newLoaderFixture(t, helloConfig)
	mustOprov(t, f.env, "install", "-C", f.freshCopy(t))
	host := helloPlatforms[0]
	f.rewriteIndex(t, "1.0.0", func(ix *ocispec.Index) {
		for i, d := range ix.Manifests {
			if d.Platform.OS+"_"+d.Platform.Architecture == host {
				ix.Manifests[i].Annotations[manifest.AnnotationH1] = helloHashes[helloPlatforms[1]].H1
			}
		}
	})
	dir := f.freshCopy(t) // no lock: the lie is locked from the re-signed index, then installed
	mustOprov(t, f.env, "lock", "-C", dir)
	r := oprov(t, f.env, "install", "-C", dir)
	if r.Code == 0 || strings.Contains(r.Stdout, "verified") || !strings.Contains(r.Stderr, "it does not describe its own package") {
		t.Errorf("install of a lying index over an earlier unpack: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = oprov(t, f.env, "schema", f.repo+":1.0.0", "--address", "example.com/acme/hello", "--key", filepath.Join(f.keys, "cosign.pub"))
	if r.Code == 0 || !strings.Contains(r.Stderr, "it does not describe its own package") {
		t.Errorf("schema of a lying index over an earlier unpack: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
