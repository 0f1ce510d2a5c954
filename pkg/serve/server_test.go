package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const base = "/example.com/acme/hello/"

type versionDoc struct {
	Archives map[string]struct {
		URL    string   `json:"url"`
		Hashes []string `json:"hashes"`
	} `json:"archives"`
}

func indexVersions(t *testing.T, s *testServer) []string {
	t.Helper()
	code, body := s.get(t, base+"index.json")
	if code != http.StatusOK {
		t.Fatalf("index.json: %d %s", code, body)
	}
	var doc struct{ Versions map[string]struct{} }
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for v := range doc.Versions {
		out = append(out, v)
	}
	return out
}

// TestProtocol: without a policy every version is listed; VERSION.json gives each platform's
// relative archive URL with its h1: and zh:, and the archive is the zip those hashes name.
func TestProtocol(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true, "1.1.0": false})
	s := f.server(t, nil, time.Minute)
	if got := indexVersions(t, s); len(got) != 2 {
		t.Fatalf("index.json lists %v, want 1.0.0 and 1.1.0", got)
	}
	code, body := s.get(t, base+"1.1.0.json")
	if code != http.StatusOK {
		t.Fatalf("1.1.0.json: %d %s", code, body)
	}
	var doc versionDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Archives) != len(testPlatforms) {
		t.Fatalf("1.1.0.json has %d archives, want %d: %s", len(doc.Archives), len(testPlatforms), body)
	}
	for _, p := range testPlatforms {
		a := doc.Archives[p.String()]
		want := f.hashes["1.1.0"][p]
		if len(a.Hashes) != 2 || a.Hashes[0] != want.ZH || a.Hashes[1] != want.H1 {
			t.Errorf("%s hashes %v, want [%s %s]", p, a.Hashes, want.ZH, want.H1)
		}
		if a.URL != "terraform-provider-hello_1.1.0_"+p.String()+".zip" {
			t.Errorf("%s url %q", p, a.URL)
		}
		code, zip := s.get(t, base+a.URL)
		sum := sha256.Sum256(zip)
		if code != http.StatusOK || "zh:"+hex.EncodeToString(sum[:]) != want.ZH {
			t.Errorf("archive %s: %d, %d bytes hashing to %x, want %s", a.URL, code, len(zip), sum, want.ZH)
		}
	}
	for path, want := range map[string]int{
		base + "terraform-provider-hello_1.1.0_plan9_amd64.zip": http.StatusNotFound, // no such platform
		base + "2.0.0.json":                                     http.StatusNotFound, // no such version
		base + "v1.0.0.json":                                    http.StatusNotFound, // not canonical
		"/example.com/acme/other/index.json":                    http.StatusNotFound, // the layout holds hello only
		base + "terraform-provider-other_1.0.0_linux_amd64.zip": http.StatusNotFound,
		"/example.com/acme/hello/x/index.json":                  http.StatusNotFound,
		"/healthz":                                              http.StatusOK,
	} {
		if code, body := s.get(t, path); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
}

// TestPolicy: under a policy an unsigned version is neither listed nor served, and the log says
// why; a signed one is both.
func TestPolicy(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true, "1.1.0": false})
	s := f.server(t, f.keyPolicy(t), time.Minute)
	if got := indexVersions(t, s); len(got) != 1 || got[0] != "1.0.0" {
		t.Fatalf("index.json lists %v under the policy, want only 1.0.0", got)
	}
	if len(s.log.logLines(`"hidden"`)) != 1 || len(s.log.logLines("1.1.0")) == 0 {
		t.Errorf("the index.json log line does not say which version was hidden and why:\n%s", s.log)
	}
	for _, path := range []string{base + "1.1.0.json", base + "terraform-provider-hello_1.1.0_linux_amd64.zip"} {
		code, body := s.get(t, path)
		id := requestID(body)
		if code != http.StatusNotFound || id == "" || strings.Contains(string(body), "sign") || strings.Contains(string(body), "sha256") {
			t.Errorf("GET %s: %d %s, want a 404 with a request id and no details", path, code, body)
		}
		lines := s.log.logLines(`"path":"` + path + `"`)
		if len(lines) != 1 || !strings.Contains(lines[0], `"refused":"policy"`) || !strings.Contains(lines[0], f.index["1.1.0"]) ||
			!strings.Contains(lines[0], "not signed") || !strings.Contains(lines[0], `"id":"`+id+`"`) {
			t.Errorf("log for %s does not give the request id, the reason and digest: %v", path, lines)
		}
	}
	if code, body := s.get(t, base+"terraform-provider-hello_1.0.0_linux_amd64.zip"); code != http.StatusOK {
		t.Errorf("the signed version's archive: %d %s", code, body)
	}
	for _, p := range testPlatforms {
		d := strings.TrimPrefix(f.hashes["1.1.0"][p].ZH, "zh:")
		if _, err := os.Stat(filepath.Join(s.cache.Dir, "blobs", "sha256", d)); err == nil {
			t.Errorf("the unsigned version's %s zip is in the cache", p)
		}
	}
}

// TestVerificationCachedByIndexDigest: a new generation (Refresh 0: every request) resolves the
// tag again but does not check the same index's signature again; a fresh server does.
func TestVerificationCachedByIndexDigest(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true})
	s := f.server(t, f.keyPolicy(t), 0)
	if code, body := s.get(t, base+"1.0.0.json"); code != http.StatusOK {
		t.Fatalf("1.0.0.json: %d %s", code, body)
	}
	if n := s.verified.Len(); n != 1 {
		t.Fatalf("%d verifications remembered, want 1", n)
	}
	removeSignatures(t, f)
	if code, body := s.get(t, base+"1.0.0.json"); code != http.StatusOK {
		t.Errorf("with the verification remembered by digest: %d %s", code, body)
	}
	fresh := f.server(t, f.keyPolicy(t), 0)
	if code, _ := fresh.get(t, base+"1.0.0.json"); code != http.StatusNotFound {
		t.Errorf("a fresh server found the removed signature: %d (so the check above proves nothing)", code)
	}
}

// removeSignatures deletes the signature blobs from the layout: every blob that is not part of a
// release (its index, manifests, config and zips) or the layout's own files.
func removeSignatures(t *testing.T, f *layoutFixture) {
	t.Helper()
	keep := map[string]bool{}
	for _, d := range f.index {
		keep[strings.TrimPrefix(d, "sha256:")] = true
	}
	blobs, _ := filepath.Glob(filepath.Join(f.dir, "blobs", "sha256", "*"))
	removed := 0
	for _, b := range blobs {
		data, _ := os.ReadFile(b)
		if !keep[filepath.Base(b)] && strings.Contains(string(data), "application/vnd.dev.sigstore.bundle") {
			os.Remove(b)
			removed++
		}
	}
	if removed == 0 {
		t.Fatal("found no signature to remove")
	}
}

// TestTamperedBlob: a zip changed in the layout is never served: 502, the log names the digest
// mismatch, and the cache holds nothing for it.
func TestTamperedBlob(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": false})
	zh := strings.TrimPrefix(f.hashes["1.0.0"][testPlatforms[0]].ZH, "zh:")
	blob := filepath.Join(f.dir, "blobs", "sha256", zh)
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff // same size, other bytes
	os.Chmod(blob, 0o644)
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := f.server(t, nil, time.Minute)
	path := base + "terraform-provider-hello_1.0.0_" + testPlatforms[0].String() + ".zip"
	code, body := s.get(t, path)
	if code != http.StatusBadGateway || strings.Contains(string(body), "PK") {
		t.Errorf("GET %s: %d, %d bytes; want a 502 without the zip", path, code, len(body))
	}
	lines := s.log.logLines(`"path":"` + path + `"`)
	if len(lines) != 1 || !strings.Contains(lines[0], "does not match its digest sha256:"+zh) || !strings.Contains(lines[0], `"refused":"digest"`) {
		t.Errorf("the log does not name the digest mismatch: %v", lines)
	}
	if s.cache.HasZip(digestOf(zh)) {
		t.Error("the tampered zip is in the cache")
	}
	var leftovers []string
	filepath.WalkDir(filepath.Join(s.cache.Dir, "tmp"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, ".lock") {
			leftovers = append(leftovers, p) // the server's own owner directory and its lock stay while it runs
		}
		return nil
	})
	if len(leftovers) != 0 {
		t.Errorf("the cache's tmp/ holds leftovers: %v", leftovers)
	}
}

// requestID gives the request id an error body names, or "".
func requestID(body []byte) string {
	_, id, ok := strings.Cut(string(body), "request id: ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(id)
}
