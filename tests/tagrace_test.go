package tests

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/tagflip"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// uMarker is the extra file that only the unsigned build U carries: it makes U's h1: hashes
// differ from S's (a different SOURCE_DATE_EPOCH alone would change the zh: hashes only, since
// h1: hashes file names and contents, not times), and it is easy to spot in a cache.
const uMarker = "UNSIGNED-BUILD-U.txt"

// tagRace is a TLS registry holding two builds of examples/hello 1.0.0, U (unsigned, no longer
// tagged, still fetchable by digest) and S (signed, tagged 1.0.0), and a front that answers the
// first request for manifests/1.0.0 with U and every later one honestly.
type tagRace struct {
	reg    *testreg.Registry
	front  *tagflip.Front
	keys   string   // holds cosign.key and cosign.pub
	env    []string // SSL_CERT_FILE, COSIGN_PASSWORD, HOME
	uIndex string   // U's index digest
	sIndex string   // S's index digest
	u, s   map[string]packagedHashes
}

const tagRaceRepo = "providers/acme/hello"

func newTagRace(t *testing.T) *tagRace {
	t.Helper()
	dir := t.TempDir()
	ca := testreg.NewCA(t, dir)
	x := &tagRace{reg: testreg.Start(t, testreg.Options{CA: ca}), keys: t.TempDir(), s: map[string]packagedHashes{}}
	x.env = []string{"SSL_CERT_FILE=" + ca.File, "COSIGN_PASSWORD=test", "HOME=" + t.TempDir()}
	R := x.reg.Host + "/" + tagRaceRepo

	sDist := helloRelease(t)
	for _, p := range helloPlatforms {
		x.s[p] = helloHashes[p]
	}
	uDist := filepath.Join(dir, "u-dist")
	x.u = unsignedBuild(t, sDist, filepath.Join(dir, "u-bin"), uDist)
	for _, p := range helloPlatforms {
		if x.u[p].ZH == "" || x.u[p].ZH == x.s[p].ZH || x.u[p].H1 == x.s[p].H1 {
			t.Fatalf("%s: U (%+v) and S (%+v) must differ in both zh: and h1:", p, x.u[p], x.s[p])
		}
	}

	x.uIndex = pushJSON(t, x.env, uDist, R, "--address", "example.com/acme/hello").IndexDigest
	x.sIndex = pushJSON(t, x.env, sDist, R, "--address", "example.com/acme/hello").IndexDigest
	mustOprov(t, x.env, "keygen", "--output-key-prefix", filepath.Join(x.keys, "cosign"))
	mustOprov(t, x.env, "sign", R+":1.0.0", "--key", filepath.Join(x.keys, "cosign.key"))
	if x.uIndex == x.sIndex {
		t.Fatalf("U and S have the same index %s", x.uIndex)
	}
	// Controls: the tag gives signed S; U, by digest, is unsigned.
	pub := filepath.Join(x.keys, "cosign.pub")
	mustOprov(t, x.env, "verify", R+":1.0.0", "--key", pub)
	if r := oprov(t, x.env, "verify", R+"@"+x.uIndex, "--key", pub); r.Code == 0 || !strings.Contains(r.Stderr, "not signed") {
		t.Fatalf("verify of U by digest: exit %d, stderr %q; want a refusal saying it is not signed", r.Code, r.Stderr)
	}
	x.front = tagflip.Start(t, tagflip.Options{Upstream: x.reg, CA: ca, Repository: tagRaceRepo, Tag: "1.0.0", Substitute: x.uIndex})
	return x
}

// unsignedBuild repackages S's executables, plus uMarker, as a second build of hello 1.0.0 and
// returns its hashes by platform.
func unsignedBuild(t *testing.T, sDist, bin, out string) map[string]packagedHashes {
	t.Helper()
	for _, p := range helloPlatforms {
		zr, err := zip.OpenReader(filepath.Join(sDist, "terraform-provider-hello_1.0.0_"+p+".zip"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(bin, p, f.Name), string(data))
			if err := os.Chmod(filepath.Join(bin, p, f.Name), f.Mode().Perm()|0o600); err != nil {
				t.Fatal(err)
			}
		}
		zr.Close()
		writeFile(t, filepath.Join(bin, p, uMarker), "this build was never signed\n")
	}
	r := mustOprov(t, nil, "package", "--bin", bin, "--name", "hello", "--version", "1.0.0", "--out-dir", out, "-o", "json")
	var res struct{ Packages []packagedHashes }
	decodeJSON(t, r.Stdout, &res)
	hashes := map[string]packagedHashes{}
	for _, p := range res.Packages {
		hashes[p.Platform] = p
	}
	return hashes
}

// TestTagMovedBetweenRequestsIsNotInstalled: the loader resolves a version tag once. A registry
// front that answers the first request for manifests/1.0.0 with an unsigned build (U) and later
// ones with the signed build (S) gets, under an enforcing policy, either a refusal or S, never U:
// no U hash in the lock file, no U bytes in the cache.
func TestTagMovedBetweenRequestsIsNotInstalled(t *testing.T) {
	x := newTagRace(t)
	front := x.front.Host + "/" + tagRaceRepo
	t.Run("control: the front serves U first, then S", func(t *testing.T) {
		x.front.Reset()
		for i, want := range []string{x.uIndex, x.sIndex} {
			var out struct {
				Index string `json:"index_digest"`
			}
			decodeJSON(t, mustOprov(t, x.env, "inspect", front+":1.0.0", "-o", "json").Stdout, &out)
			if out.Index != want {
				t.Fatalf("inspect %d through the front gave index %s, want %s", i+1, out.Index, want)
			}
		}
	})
	for _, tc := range []struct {
		name  string
		args  func(cfg, cache string) []string
		locks bool // the command writes .terraform.lock.hcl
	}{
		{"oprov lock", func(cfg, _ string) []string { return []string{"lock", "-C", cfg} }, true},
		{"oprov install", func(cfg, _ string) []string { return []string{"install", "-C", cfg} }, true},
		{"oprov run", func(cfg, _ string) []string { return []string{"run", "-C", cfg, "--", "true"} }, true},
		{"oprov schema", func(_, cache string) []string {
			return []string{"schema", front + ":1.0.0", "--address", "example.com/acme/hello", "--key", filepath.Join(x.keys, "cosign.pub"),
				"--ca-file", x.reg.CAFile, "--cache-dir", cache, "-o", "json"}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, cache := x.config(t), filepath.Join(t.TempDir(), "cache")
			x.front.Reset()
			r := oprov(t, append(append([]string{}, x.env...), "OPROV_CACHE_DIR="+cache), tc.args(cfg, cache)...)
			t.Logf("exit %d; %s requested %d times through the front (the first answered with U), %d requests in all\n%s%s",
				r.Code, x.front.TagPath(), x.front.Count(x.front.TagPath()), total(x.front.Counts()), clip(r.Stdout, 400), r.Stderr)
			if n := x.front.Substituted(); n != 1 {
				t.Errorf("the front served U %d times, want 1: the test proves nothing", n)
			}
			x.expectNoU(t, filepath.Join(cfg, ".terraform.lock.hcl"), cache)
			if r.Code != 0 {
				x.expectRefusal(t, r)
				return
			}
			if tc.locks {
				x.expectLockedS(t, filepath.Join(cfg, ".terraform.lock.hcl"), tc.name == "oprov lock")
			} else {
				x.expectCachedS(t, cache, r.Stdout)
			}
		})
	}
}

// config writes a configuration using hello ~> 1.0 through the front, under an enforcing policy.
func (x *tagRace) config(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.tf"), helloConfig)
	writeFile(t, filepath.Join(dir, "oprov.hcl"), `oci_mirror {
  repository_template = "`+x.front.Host+`/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
  public_keys         = ["`+filepath.Join(x.keys, "cosign.pub")+`"]
}
`)
	return dir
}

func (x *tagRace) expectRefusal(t *testing.T, r result) {
	t.Helper()
	msg := strings.ToLower(r.Stderr)
	if !strings.Contains(msg, "not signed") && !strings.Contains(msg, "verif") && !strings.Contains(msg, "signature") {
		t.Errorf("refused (exit %d), but not for the missing signature:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// expectNoU checks that neither the lock file (when there is one) nor the cache holds anything
// of U: no U hash in the lock; in the cache no file or directory named by a U zip's digest, no
// uMarker, and no file whose content is a U zip.
func (x *tagRace) expectNoU(t *testing.T, lock, cache string) {
	t.Helper()
	if data, err := os.ReadFile(lock); err == nil {
		var found []string
		for _, p := range helloPlatforms {
			for _, h := range []string{x.u[p].ZH, x.u[p].H1} {
				if strings.Contains(string(data), h) {
					found = append(found, p+" "+h)
				}
			}
		}
		if len(found) > 0 {
			t.Errorf("the lock file holds U's hashes:\n  %s\n%s", strings.Join(found, "\n  "), data)
		}
	}
	uZips := map[string]string{} // hex sha256 -> platform
	for p, h := range x.u {
		uZips[strings.TrimPrefix(h.ZH, "zh:")] = p
	}
	var found []string
	filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(cache, path)
		if d.Name() == uMarker {
			found = append(found, rel+" (U's unpacked package)")
			return nil
		}
		if d.Type().IsRegular() {
			if p, ok := uZips[fileSHA256(t, path)]; ok {
				found = append(found, rel+" (U's "+p+" zip)")
				return nil
			}
		}
		for hx, p := range uZips {
			if strings.Contains(d.Name(), hx[:32]) {
				found = append(found, rel+" (named by U's "+p+" zip digest)")
			}
		}
		return nil
	})
	if len(found) > 0 {
		t.Errorf("the cache holds U:\n  %s", strings.Join(found, "\n  "))
	}
}

// expectLockedS checks that the lock holds S's hashes: every platform's for oprov lock, this
// machine's at least otherwise.
func (x *tagRace) expectLockedS(t *testing.T, lock string, every bool) {
	t.Helper()
	hashes := lockHashes(t, lock, "example.com/acme/hello")
	for p, h := range x.s {
		if (every || p == runtime.GOOS+"_"+runtime.GOARCH) && (!contains(hashes, h.ZH) || !contains(hashes, h.H1)) {
			t.Errorf("the lock lacks S's %s hashes (%s, %s): %v", p, h.ZH, h.H1, hashes)
		}
	}
}

// expectCachedS checks that oprov schema ran S: the cache holds S's zip for this machine, and the
// schema is hello's.
func (x *tagRace) expectCachedS(t *testing.T, cache, stdout string) {
	t.Helper()
	s := x.s[runtime.GOOS+"_"+runtime.GOARCH]
	if _, err := os.Stat(filepath.Join(cache, "blobs", "sha256", strings.TrimPrefix(s.ZH, "zh:"))); err != nil {
		t.Errorf("the cache lacks S's zip for this machine: %v", err)
	}
	if !strings.Contains(stdout, "hello_greeting") {
		t.Errorf("the schema is not hello's:\n%s", stdout)
	}
}

// clip shortens s to at most n bytes, for logs.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "...\n"
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
