package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// cosignCLI runs the stock cosign CLI with the registry's CA trusted and the key password set.
func cosignCLI(t *testing.T, reg *testreg.Registry, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(peers.Require(t, "cosign"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+reg.CAFile, "COSIGN_PASSWORD=test-password", "HOME="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// The exact offline flags that work with the stock cosign v2.6 CLI (the README repeats them).
var (
	cosignSignDefault  = []string{"sign", "--key", "cosign.key", "--tlog-upload=false", "--yes"}
	cosignSignBundle   = []string{"sign", "--key", "cosign.key", "--tlog-upload=false", "--new-bundle-format", "--use-signing-config=false", "--yes"}
	cosignVerifyLegacy = []string{"verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true"}
	cosignVerifyBundle = []string{"verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true", "--new-bundle-format", "--trusted-root", "empty-root.json"}
)

// versionedHello pushes examples/hello's zips under another version into repo and returns the
// index digest. Each version gets its own index (the zip names differ).
func versionedHello(t *testing.T, reg *testreg.Registry, repo, version string) string {
	t.Helper()
	return pushVersion(t, reg.Host, reg.CAFile, repo, version)
}

// pushVersion pushes examples/hello's zips under another version to repo on any registry whose
// certificate caFile signed, and returns the index digest.
func pushVersion(t *testing.T, host, caFile, repo, version string) string {
	t.Helper()
	src := helloRelease(t)
	dir := t.TempDir()
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".zip") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, strings.Replace(e.Name(), "_1.0.0_", "_"+version+"_", 1)), string(data))
	}
	return pushJSON(t, nil, dir, host+"/"+repo, "--ca-file", caFile, "--address", "example.com/acme/hello").IndexDigest
}

// TestSigningInteroperatesWithCosign: oprov's signatures verify with the stock cosign CLI, and
// cosign's (both forms) with oprov; tofu still installs a signed version.
func TestSigningInteroperatesWithCosign(t *testing.T) {
	reg := testreg.Start(t, testreg.Options{})
	keys := t.TempDir()
	writeFile(t, filepath.Join(keys, "empty-root.json"), `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
	// oprov keygen writes the pair; cosign uses it as its own.
	mustOprov(t, []string{"COSIGN_PASSWORD=test-password"}, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	const repo = "providers/acme/hello"
	R := reg.Host + "/" + repo
	pass := []string{"COSIGN_PASSWORD=test-password"}
	ca := []string{"--ca-file", reg.CAFile}

	t.Run("oprov sign, cosign verify (bundle)", func(t *testing.T) {
		versionedHello(t, reg, repo, "1.0.0")
		mustOprov(t, pass, append([]string{"sign", R + ":1.0.0", "--key", filepath.Join(keys, "cosign.key")}, ca...)...)
		if out, err := cosignCLI(t, reg, keys, append(cosignVerifyBundle, R+":1.0.0")...); err != nil {
			t.Fatalf("cosign verify: %v\n%s", err, out)
		}
	})
	t.Run("oprov push --sign --legacy-tag, cosign verify (default form)", func(t *testing.T) {
		dist := helloRelease(t)
		dir := t.TempDir()
		copyDir(t, dist, dir)
		for _, p := range helloPlatforms {
			os.Rename(filepath.Join(dir, "terraform-provider-hello_1.0.0_"+p+".zip"), filepath.Join(dir, "terraform-provider-hello_1.1.0_"+p+".zip"))
		}
		os.Remove(filepath.Join(dir, "terraform-provider-hello_1.0.0_SHA256SUMS"))
		mustOprov(t, pass, append([]string{"push", dir, R, "--sign", "--key", filepath.Join(keys, "cosign.key"), "--legacy-tag"}, ca...)...)
		if out, err := cosignCLI(t, reg, keys, append(cosignVerifyLegacy, R+":1.1.0")...); err != nil {
			t.Fatalf("cosign verify: %v\n%s", err, out)
		}
	})
	t.Run("cosign sign (default form), oprov verify", func(t *testing.T) {
		d := versionedHello(t, reg, repo, "1.2.0")
		if out, err := cosignCLI(t, reg, keys, append(cosignSignDefault, R+"@"+d)...); err != nil {
			t.Fatalf("cosign sign: %v\n%s", err, out)
		}
		r := mustOprov(t, nil, append([]string{"verify", R + ":1.2.0", "--key", filepath.Join(keys, "cosign.pub"), "-o", "json"}, ca...)...)
		expectVerified(t, r.Stdout, "legacy-tag", d)
	})
	t.Run("cosign sign (bundle form), oprov verify", func(t *testing.T) {
		d := versionedHello(t, reg, repo, "1.3.0")
		if out, err := cosignCLI(t, reg, keys, append(cosignSignBundle, R+"@"+d)...); err != nil {
			t.Fatalf("cosign sign: %v\n%s", err, out)
		}
		r := mustOprov(t, nil, append([]string{"verify", R + ":1.3.0", "--key", filepath.Join(keys, "cosign.pub"), "-o", "json"}, ca...)...)
		expectVerified(t, r.Stdout, "bundle", d)
	})
	t.Run("oprov signs with a key the cosign CLI generated", func(t *testing.T) {
		dir := t.TempDir()
		if out, err := cosignCLI(t, reg, dir, "generate-key-pair"); err != nil {
			t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
		}
		versionedHello(t, reg, repo, "1.4.0")
		mustOprov(t, pass, append([]string{"sign", R + ":1.4.0", "--key", filepath.Join(dir, "cosign.key")}, ca...)...)
		mustOprov(t, nil, append([]string{"verify", R + ":1.4.0", "--key", filepath.Join(dir, "cosign.pub")}, ca...)...)
		r := oprov(t, []string{"COSIGN_PASSWORD=wrong"}, append([]string{"sign", R + ":1.4.0", "--key", filepath.Join(dir, "cosign.key")}, ca...)...)
		if r.Code != 1 || !strings.Contains(r.Stderr, "wrong COSIGN_PASSWORD") {
			t.Errorf("wrong password: exit %d, stderr %q", r.Code, r.Stderr)
		}
	})
	t.Run("tofu init still installs a signed version", func(t *testing.T) {
		// The repository now holds .sig tags and referrers-tag indexes beside the versions.
		tags := registryTags(t, reg, repo)
		if !hasTagLike(tags, ".sig") || !hasTagLike(tags, "sha256-") {
			t.Fatalf("expected signature tags in %v", tags)
		}
		pushOut := pushJSON(t, nil, helloRelease(t), R, "--ca-file", reg.CAFile, "--address", "example.com/acme/hello")
		mustOprov(t, pass, append([]string{"sign", R + ":1.0.0", "--key", filepath.Join(keys, "cosign.key")}, ca...)...)
		tofuApplyHello(t, pushOut.TofuRC, reg.CAFile)
	})
}

func expectVerified(t *testing.T, stdout, form, digest string) {
	t.Helper()
	var out struct {
		Verified bool
		Result   struct {
			Digest     string `json:"index_digest"`
			Signatures []struct{ Form string }
			Platforms  []struct {
				Platform string
				Fetched  bool `json:"zip_fetched"`
			}
		}
	}
	decodeJSON(t, stdout, &out)
	if !out.Verified || out.Result.Digest != digest || len(out.Result.Signatures) == 0 || out.Result.Signatures[0].Form != form {
		t.Errorf("verify output: %s", stdout)
	}
	if len(out.Result.Platforms) != len(helloPlatforms) {
		t.Errorf("verify did not check every platform's manifest: %s", stdout)
	}
	for _, p := range out.Result.Platforms {
		if p.Fetched != (p.Platform == helloPlatforms[0]) {
			t.Errorf("by default verify fetches exactly this machine's zip (%s): %s", helloPlatforms[0], stdout)
		}
	}
}

func registryTags(t *testing.T, reg *testreg.Registry, repo string) []string {
	t.Helper()
	resp, err := reg.Client(t).Get(reg.URL() + "/v2/" + repo + "/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tl struct{ Tags []string }
	json.NewDecoder(resp.Body).Decode(&tl)
	return tl.Tags
}

func hasTagLike(tags []string, s string) bool {
	for _, t := range tags {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// copyManifest re-tags a manifest inside the registry, as someone with push access could.
func copyManifest(t *testing.T, reg *testreg.Registry, repo, from, to string) {
	t.Helper()
	c := reg.Client(t)
	req, _ := http.NewRequest("GET", reg.URL()+"/v2/"+repo+"/manifests/"+from, nil)
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET manifest %s: %s", from, resp.Status)
	}
	put, _ := http.NewRequest("PUT", reg.URL()+"/v2/"+repo+"/manifests/"+to, bytes.NewReader(body))
	put.Header.Set("Content-Type", resp.Header.Get("Content-Type"))
	resp, err = c.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("PUT manifest %s: %s", to, resp.Status)
	}
}

// verifyFixture is a TLS registry and two key pairs, trusted and untrusted, for refusals by
// oprov verify.
type verifyFixture struct {
	reg  *testreg.Registry
	keys string
	pass []string
	R    string // HOST/verifyRepo
	ca   []string
}

const verifyRepo = "providers/acme/hello"

func newVerifyFixture(t *testing.T) *verifyFixture {
	f := &verifyFixture{reg: testreg.Start(t, testreg.Options{}), keys: t.TempDir(), pass: []string{"COSIGN_PASSWORD=test-password"}}
	mustOprov(t, f.pass, "keygen", "--output-key-prefix", filepath.Join(f.keys, "trusted"))
	mustOprov(t, f.pass, "keygen", "--output-key-prefix", filepath.Join(f.keys, "untrusted"))
	f.R = f.reg.Host + "/" + verifyRepo
	f.ca = []string{"--ca-file", f.reg.CAFile}
	return f
}

func (f *verifyFixture) signWith(t *testing.T, key, version string, extra ...string) {
	mustOprov(t, f.pass, append(append([]string{"sign", f.R + ":" + version, "--key", filepath.Join(f.keys, key+".key")}, f.ca...), extra...)...)
}

func (f *verifyFixture) verify(t *testing.T, version string) result {
	return oprov(t, nil, append([]string{"verify", f.R + ":" + version, "--key", filepath.Join(f.keys, "trusted.pub")}, f.ca...)...)
}

func expectRefused(t *testing.T, r result, version, digest, want string) {
	t.Helper()
	code := 10 // refused
	if want == "not signed" {
		code = 12
	}
	if r.Code != code || !strings.Contains(r.Stderr, want) {
		t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.Code, r.Stderr, code, want)
	}
	if !strings.Contains(r.Stderr, version) || !strings.Contains(r.Stderr, digest) {
		t.Errorf("the error should name version %s and digest %s: %s", version, digest, r.Stderr)
	}
}

// TestVerifyRefuses: each way a signature can fail to cover what is installed is refused, with
// exit code 10 (12 when not signed at all) and a message naming the version and digest.
func TestVerifyRefuses(t *testing.T) {
	f := newVerifyFixture(t)
	d1 := versionedHello(t, f.reg, verifyRepo, "1.0.0")
	d2 := versionedHello(t, f.reg, verifyRepo, "2.0.0")
	d3 := versionedHello(t, f.reg, verifyRepo, "3.0.0")
	f.signWith(t, "trusted", "1.0.0", "--legacy-tag")
	f.signWith(t, "trusted", "2.0.0")
	if r := f.verify(t, "1.0.0"); r.Code != 0 {
		t.Fatalf("a good signature was refused: %s", r.Stderr)
	}

	t.Run("untrusted key", func(t *testing.T) {
		d := versionedHello(t, f.reg, verifyRepo, "4.0.0")
		f.signWith(t, "untrusted", "4.0.0")
		expectRefused(t, f.verify(t, "4.0.0"), "4.0.0", d, "none by a trusted key")
	})
	t.Run("unsigned version", func(t *testing.T) {
		expectRefused(t, f.verify(t, "3.0.0"), "3.0.0", d3, "not signed")
	})
	t.Run("tag moved to another validly signed index", func(t *testing.T) {
		versionedHello(t, f.reg, verifyRepo, "5.0.0")
		f.signWith(t, "trusted", "5.0.0")
		copyManifest(t, f.reg, verifyRepo, d2, "5.0.0") // 5.0.0 now points at 2.0.0's signed index
		expectRefused(t, f.verify(t, "5.0.0"), "5.0.0", d2, "the tag was moved")
	})
	t.Run("signature payload names another digest", func(t *testing.T) {
		// 1.0.0's .sig (a trusted key's signature over d1) stored as 3.0.0's.
		copyManifest(t, f.reg, verifyRepo, "sha256-"+strings.TrimPrefix(d1, "sha256:")+".sig", "sha256-"+strings.TrimPrefix(d3, "sha256:")+".sig")
		expectRefused(t, f.verify(t, "3.0.0"), "3.0.0", d3, "names "+d1+", not "+d3)
	})
	t.Run("policy: enforce refuses, warn reports and passes", func(t *testing.T) {
		f.policyRefusals(t)
	})
	t.Run("zip changed in the registry's storage", func(t *testing.T) {
		f.zipChangedInStorage(t, d1)
	})
}

// policyRefusals: under a trust policy, an enforce rule refuses an unsigned version, a warn rule
// reports it and passes, and a broken policy is an error naming the line.
func (f *verifyFixture) policyRefusals(t *testing.T) {
	trusted, _ := os.ReadFile(filepath.Join(f.keys, "trusted.pub"))
	writeFile(t, filepath.Join(f.keys, "k", "trusted.pub"), string(trusted))
	policy := filepath.Join(f.keys, "policy.hcl")
	writeFile(t, policy, `mode = "enforce"

trust "acme" {
  providers = ["example.com/acme/*"]
  keys      = ["k/trusted.pub"]
}

trust "lab" {
  repositories = ["`+f.reg.Host+`/providers/**"]
  keys         = ["k/trusted.pub"]
  mode         = "warn"
}
`)
	d6 := versionedHello(t, f.reg, verifyRepo, "6.0.0")
	// By provider address: the enforce rule applies.
	r := oprov(t, nil, append([]string{"verify", f.R + ":6.0.0", "--policy", policy, "--address", "example.com/acme/hello"}, f.ca...)...)
	expectRefused(t, r, "6.0.0", d6, "not signed")
	r = oprov(t, nil, append([]string{"verify", f.R + ":2.0.0", "--policy", policy, "--address", "example.com/acme/hello"}, f.ca...)...)
	if r.Code != 0 {
		t.Errorf("policy, signed version: exit %d: %s", r.Code, r.Stderr)
	}
	// By repository only: the warn rule applies.
	r = oprov(t, nil, append([]string{"verify", f.R + ":6.0.0", "--policy", policy}, f.ca...)...)
	if r.Code != 0 || !strings.Contains(r.Stderr, "warning") || !strings.Contains(r.Stderr, "not signed") {
		t.Errorf("warn mode: exit %d, stderr %q", r.Code, r.Stderr)
	}
	// A broken policy is an error that points at the line of the mistake.
	writeFile(t, policy, "trust \"x\" {\n  keys = [\"k/trusted.pub\"]\n  mode = \"sometimes\"\n}\n")
	r = oprov(t, nil, append([]string{"verify", f.R + ":2.0.0", "--policy", policy}, f.ca...)...)
	if r.Code != 1 || !strings.Contains(r.Stderr, "policy.hcl:3") {
		t.Errorf("bad policy: exit %d, stderr %q", r.Code, r.Stderr)
	}
}

// zipChangedInStorage: a zip corrupted in the registry's storage is refused by verify when it
// fetches that zip (--platform, --all-platforms), and not by the default verify, which does not.
func (f *verifyFixture) zipChangedInStorage(t *testing.T, d1 string) {
	r := mustOprov(t, nil, append([]string{"inspect", f.R + ":1.0.0", "-o", "json"}, f.ca...)...)
	var out struct {
		Platforms []struct {
			Platform string
			Zip      string `json:"zip_digest"`
		}
	}
	decodeJSON(t, r.Stdout, &out)
	// Corrupt another platform's zip: the default verify (this machine's zip) does not fetch
	// it, --platform and --all-platforms do.
	other := out.Platforms[0]
	if other.Platform == helloPlatforms[0] {
		other = out.Platforms[1]
	}
	blob := f.reg.BlobPath(strings.TrimPrefix(other.Zip, "sha256:"))
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := f.verify(t, "1.0.0"); r.Code != 0 {
		t.Errorf("the corrupt zip is not this machine's, but verify failed: %s", r.Stderr)
	}
	all := oprov(t, nil, append([]string{"verify", f.R + ":1.0.0", "--key", filepath.Join(f.keys, "trusted.pub"), "--all-platforms"}, f.ca...)...)
	expectRefused(t, all, "1.0.0", d1, "does not match its digest")
	one := oprov(t, nil, append([]string{"verify", f.R + ":1.0.0", "--key", filepath.Join(f.keys, "trusted.pub"), "--platform", other.Platform}, f.ca...)...)
	expectRefused(t, one, "1.0.0", d1, "does not match its digest")
}
