package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// httpTrace is what OPROV_DEBUG_HTTP=1 says a run did: the requests ("METHOD URL") and the bytes
// of response bodies read.
type httpTrace struct {
	Requests []string
	Bytes    int64
}

func traceOf(stderr string) httpTrace {
	var tr httpTrace
	for _, line := range strings.Split(stderr, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && f[0] == "http:":
			for i := 1; i+1 < len(f); i++ {
				if strings.HasPrefix(f[i+1], "http") && strings.ToUpper(f[i]) == f[i] {
					tr.Requests = append(tr.Requests, f[i]+" "+f[i+1])
					break
				}
			}
		case len(f) >= 3 && f[0] == "http-body:":
			n, _ := strconv.ParseInt(f[1], 10, 64)
			tr.Bytes += n
		}
	}
	return tr
}

// blobGets counts the GETs of the given blobs (by digest) in a trace.
func (tr httpTrace) blobGets(digests ...string) int {
	n := 0
	for _, r := range tr.Requests {
		for _, d := range digests {
			if strings.HasPrefix(r, "GET ") && strings.HasSuffix(r, "/blobs/"+d) {
				n++
			}
		}
	}
	return n
}

// zipDigests lists the zip digests a push reported.
func (p pushOutput) zipDigests() []string {
	var out []string
	for _, pl := range p.Platforms {
		out = append(out, pl.Zip)
	}
	return out
}

// TestLockFromIndexH1: push records each platform's h1: on the index, so oprov lock writes every
// platform's zh: and h1: without fetching a single zip, and install then fetches only this
// machine's zip (and checks it against the recorded h1:).
func TestLockFromIndexH1(t *testing.T) {
	f := newLoaderFixture(t, helloConfig)
	debug := append(append([]string{}, f.env...), "OPROV_DEBUG_HTTP=1")
	r := mustOprov(t, debug, "lock", "-C", f.cfg)
	tr := traceOf(r.Stderr)
	if n := tr.blobGets(f.push.zipDigests()...); n != 0 {
		t.Errorf("oprov lock fetched %d zips; the index's h1: annotations should make that unnecessary:\n%s", n, strings.Join(tr.Requests, "\n"))
	}
	hashes := lockHashes(t, filepath.Join(f.cfg, ".terraform.lock.hcl"), "example.com/acme/hello")
	for _, p := range f.push.Platforms {
		if !contains(hashes, "zh:"+strings.TrimPrefix(p.Zip, "sha256:")) || !contains(hashes, helloHashes[p.Platform].H1) {
			t.Errorf("lock lacks %s's zh:/h1: hashes: %v", p.Platform, hashes)
		}
	}
	t.Logf("oprov lock: %d requests, %d body bytes", len(tr.Requests), tr.Bytes)

	r = mustOprov(t, debug, "install", "-C", f.cfg)
	tr = traceOf(r.Stderr)
	if n := tr.blobGets(f.push.zipDigests()...); n != 1 {
		t.Errorf("oprov install fetched %d zips, want only this machine's:\n%s", n, strings.Join(tr.Requests, "\n"))
	}
}

// rewriteIndex fetches a version's index from a registry, lets edit change it, puts it back
// under the same tag, and gives the new index's digest.
func rewriteIndex(t testing.TB, reg *testreg.Registry, repo, tag string, edit func(ix *ocispec.Index)) string {
	t.Helper()
	c := reg.Client(t)
	u := reg.URL() + "/v2/" + repo + "/manifests/" + tag
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageIndex)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ix ocispec.Index
	if err := json.Unmarshal(data, &ix); err != nil {
		t.Fatal(err)
	}
	edit(&ix)
	data, _ = json.Marshal(ix)
	req, _ = http.NewRequest(http.MethodPut, u, bytes.NewReader(data))
	req.Header.Set("Content-Type", ocispec.MediaTypeImageIndex)
	if resp, err = c.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("putting the rewritten index: %v %v", err, resp)
	}
	resp.Body.Close()
	return digest.FromBytes(data).String()
}

// withoutH1 removes the h1: annotations from an index, as ORAS or a hand-made index has none.
func withoutH1(ix *ocispec.Index) {
	for i := range ix.Manifests {
		ix.Manifests[i].Annotations = nil
	}
}

// rewriteIndex rewrites the fixture's version and signs the new index, as a publisher would.
func (f *loaderFixture) rewriteIndex(t *testing.T, tag string, edit func(ix *ocispec.Index)) {
	t.Helper()
	d := rewriteIndex(t, f.reg, "providers/acme/hello", tag, edit)
	mustOprov(t, f.env, "sign", f.repo+"@"+d, "--key", filepath.Join(f.keys, "cosign.key"))
}

// TestLyingH1Refused: an index (signed by the trusted key) whose h1: annotation for this machine
// does not describe its zip is refused once the zip is fetched, with the lock written from it or
// not, and nothing is unpacked.
func TestLyingH1Refused(t *testing.T) {
	f := newLoaderFixture(t, helloConfig)
	host := helloPlatforms[0]
	f.rewriteIndex(t, "1.0.0", func(ix *ocispec.Index) {
		for i, d := range ix.Manifests {
			if d.Platform.OS+"_"+d.Platform.Architecture == host {
				ix.Manifests[i].Annotations[manifest.AnnotationH1] = helloHashes[helloPlatforms[1]].H1
			}
		}
	})
	for _, withLock := range []bool{false, true} {
		dir := f.freshCopy(t)
		cache := filepath.Join(t.TempDir(), "cache")
		env := append(append([]string{}, f.env...), "OPROV_CACHE_DIR="+cache)
		if withLock {
			mustOprov(t, env, "lock", "-C", dir)
		}
		r := oprov(t, env, "install", "-C", dir)
		if r.Code == 0 || !strings.Contains(r.Stderr, "it does not describe its own package, so nothing was installed") || !strings.Contains(r.Stderr, manifest.AnnotationH1) {
			t.Errorf("lock first: %v: install of a lying index: exit %d\n%s", withLock, r.Code, r.Stderr)
		}
		if roots, _ := filepath.Glob(filepath.Join(cache, "mirror", "*")); len(roots) != 0 {
			t.Errorf("lock first: %v: unpacked despite the lie: %v", withLock, roots)
		}
	}
}

// TestLockWithoutH1FallsBack: an index published without the annotation (by ORAS or by hand)
// still locks every platform, by downloading each zip, and installs.
func TestLockWithoutH1FallsBack(t *testing.T) {
	f := newLoaderFixture(t, helloConfig)
	f.rewriteIndex(t, "1.0.0", withoutH1)
	debug := append(append([]string{}, f.env...), "OPROV_DEBUG_HTTP=1")
	r := mustOprov(t, debug, "lock", "-C", f.cfg)
	if n := traceOf(r.Stderr).blobGets(f.push.zipDigests()...); n != len(f.push.Platforms) {
		t.Errorf("oprov lock fetched %d zips, want all %d", n, len(f.push.Platforms))
	}
	hashes := lockHashes(t, filepath.Join(f.cfg, ".terraform.lock.hcl"), "example.com/acme/hello")
	for _, p := range f.push.Platforms {
		if !contains(hashes, helloHashes[p.Platform].H1) {
			t.Errorf("lock lacks %s's h1: %v", p.Platform, hashes)
		}
	}
	mustOprov(t, f.env, "install", "-C", f.freshCopy(t))
}
