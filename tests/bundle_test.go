package tests

import (
	"archive/tar"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	origin "github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// bundleListing is the part of save --config's JSON the tests read.
type bundleListing struct {
	Providers []struct {
		Address     string
		Version     string
		VersionFrom string `json:"version_from"`
		From        string
		Repository  string
		Tag         string
		Index       string `json:"index_digest"`
		Platforms   []string
		Evidence    string
		InBundle    bool `json:"in_bundle"`
	}
	Blobs   []string
	Omitted []string
}

// airGapFixture: a configuration that needs a cosign-signed provider from a TLS registry (mapped
// by oprov.hcl) in its root module and a provider from an origin registry (GPG-signed
// SHA256SUMS) in a local module.
type airGapFixture struct {
	ca        *testreg.CA
	connected *testreg.Registry
	org       *origin.Origin
	env       []string
	cfg       string
	pub       string
}

func newAirGapFixture(t *testing.T) *airGapFixture {
	t.Helper()
	f := &airGapFixture{}
	f.ca = testreg.NewCA(t, t.TempDir())
	f.connected = testreg.Start(t, testreg.Options{CA: f.ca})
	f.org = origin.Start(t, f.ca, helloRelease(t), "acme", "hello", "1.0.0")
	keys := t.TempDir()
	f.env = []string{"SSL_CERT_FILE=" + f.ca.File, "COSIGN_PASSWORD=test-password", "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE="}
	mustOprov(t, f.env, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	f.pub = filepath.Join(keys, "cosign.pub")
	pushJSON(t, f.env, helloRelease(t), f.connected.Host+"/providers/acme/hello", "--address", "example.com/acme/hello", "--sign", "--key", filepath.Join(keys, "cosign.key"))

	f.cfg = t.TempDir()
	writeFile(t, filepath.Join(f.cfg, "main.tf"), helloConfig+"\nmodule \"m\" {\n  source = \"./mod\"\n}\n")
	writeFile(t, filepath.Join(f.cfg, "mod", "main.tf"), "terraform {\n  required_providers {\n    hello = {\n      source = \""+f.org.Address()+"\"\n      version = \">= 1.0\"\n    }\n  }\n}\n")
	writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), "oci_mirror {\n  repository_template = \""+f.connected.Host+"/providers/${namespace}/${type}\"\n  include = [\"example.com/acme/*\"]\n  public_keys = [\""+f.pub+"\"]\n}\n")
	return f
}

func (f *airGapFixture) save(t *testing.T, out string, extra ...string) bundleListing {
	t.Helper()
	args := []string{"save", "--config", f.cfg, "--to", out, "-o", "json", "--platform", helloPlatforms[0], "--platform", helloPlatforms[1]}
	r := mustOprov(t, f.env, append(args, extra...)...)
	var l bundleListing
	decodeJSON(t, r.Stdout, &l)
	return l
}

// TestSaveConfigAcrossAirGap: one command bundles a configuration's providers (a signed OCI one
// and an origin one, for two platforms); with the registry and the origin stopped, the bundle
// loads into a second registry, and tofu init and apply work with only the printed CLI
// configuration.
func TestSaveConfigAcrossAirGap(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newAirGapFixture(t)
	tarball := filepath.Join(t.TempDir(), "deps.tar")
	l := f.save(t, tarball)
	if len(l.Providers) != 2 {
		t.Fatalf("the bundle lists %d providers, want 2: %+v", len(l.Providers), l)
	}
	for _, p := range l.Providers {
		want := map[string]string{"example.com/acme/hello": "oci", f.org.Address(): "origin"}[p.Address]
		if p.From != want || len(p.Platforms) != 2 || p.Version != "1.0.0" || !strings.Contains(p.VersionFrom, "highest matching") {
			t.Errorf("listed %+v, want from %s, 2 platforms, 1.0.0 as the highest matching", p, want)
		}
		if want == "origin" && !strings.Contains(p.Evidence, "gpg") || want == "oci" && !strings.Contains(p.Evidence, "cosign") {
			t.Errorf("%s was authenticated by %q", p.Address, p.Evidence)
		}
	}
	if _, err := os.Stat(tarball + ".listing.json"); err != nil {
		t.Errorf("no listing beside the tarball: %v", err)
	}

	f.connected.Stop()
	f.org.Stop()
	airgapped := testreg.Start(t, testreg.Options{CA: f.ca})
	to := airgapped.Host + "/airgap"
	r := mustOprov(t, f.env, "load", tarball, "--to", to, "-o", "json")
	var loaded struct {
		Loaded []struct{ Repository string }
		TofuRC string `json:"tofurc"`
		Oprov  string `json:"oprov_hcl"`
	}
	decodeJSON(t, r.Stdout, &loaded)
	if len(loaded.Loaded) != 2 {
		t.Fatalf("load: %s", r.Stdout)
	}
	// The hostname is in each repository, so providers of two origins cannot collide.
	for _, want := range []string{to + "/example.com/acme/hello", to + "/" + strings.ReplaceAll(f.org.Host, ":", "_") + "/acme/hello"} {
		found := false
		for _, lr := range loaded.Loaded {
			found = found || lr.Repository == want
		}
		if !found {
			t.Errorf("nothing loaded into %s: %s", want, r.Stdout)
		}
	}
	// Signatures travelled: the OCI provider verifies in the second registry.
	mustOprov(t, f.env, "verify", to+"/example.com/acme/hello:1.0.0", "--key", f.pub)
	r = mustOprov(t, f.env, "discover", to+"/"+strings.ReplaceAll(f.org.Host, ":", "_")+"/acme/hello:1.0.0", "-o", "json")
	if !strings.Contains(r.Stdout, "application/vnd.oprov.provider-shasums.v1") {
		t.Errorf("the origin's signed SHA256SUMS did not travel: %s", r.Stdout)
	}

	work := t.TempDir()
	rc := filepath.Join(work, "tofurc")
	writeFile(t, rc, loaded.TofuRC)
	cfg := filepath.Join(work, "cfg")
	for _, name := range []string{"main.tf", "mod/main.tf"} {
		data, err := os.ReadFile(filepath.Join(f.cfg, name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(cfg, name), string(data))
	}
	env := []string{"TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + f.ca.File, "HOME=" + t.TempDir()}
	mustTofu(t, tofu, cfg, env, "init", "-input=false")
	mustTofu(t, tofu, cfg, env, "apply", "-auto-approve", "-input=false")
	var outputs map[string]struct{ Value string }
	tofuJSON(t, tofu, cfg, env, &outputs, "output", "-json")
	if outputs["message"].Value != "Hello, oprov!" {
		t.Errorf("after apply, message = %q", outputs["message"].Value)
	}
	// Both providers came from the second registry (the first and the origin are stopped).
	lock, _ := os.ReadFile(filepath.Join(cfg, ".terraform.lock.hcl"))
	for _, a := range []string{"example.com/acme/hello", f.org.Address()} {
		if !strings.Contains(string(lock), a) {
			t.Errorf("tofu did not lock %s:\n%s", a, lock)
		}
	}

	// With the lock tofu just wrote, save takes its versions and its platforms (no --platform).
	t.Run("versions and platforms from the lock file", func(t *testing.T) {
		writeFile(t, filepath.Join(f.cfg, ".terraform.lock.hcl"), string(lock))
		defer os.Remove(filepath.Join(f.cfg, ".terraform.lock.hcl"))
		// The first registry and the origin are stopped: save from the second one.
		writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), loaded.Oprov)
		out := filepath.Join(t.TempDir(), "locked.tar")
		r := mustOprov(t, f.env, "save", "--config", f.cfg, "--to", out, "-o", "json")
		var l bundleListing
		decodeJSON(t, r.Stdout, &l)
		for _, p := range l.Providers {
			if p.VersionFrom != "lock file" || len(p.Platforms) != 1 || p.Platforms[0] != helloPlatforms[0] {
				t.Errorf("with a lock recording %s only: %+v", helloPlatforms[0], p)
			}
		}
	})

	// Terraform 1.5.7, which cannot read OCI, through oprov init with the printed oprov.hcl.
	t.Run("terraform through oprov init", func(t *testing.T) {
		terraform := peers.Require(t, "terraform")
		tcfg := filepath.Join(t.TempDir(), "cfg")
		for _, name := range []string{"main.tf", "mod/main.tf"} {
			data, err := os.ReadFile(filepath.Join(f.cfg, name))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(tcfg, name), string(data))
		}
		writeFile(t, filepath.Join(tcfg, "oprov.hcl"), loaded.Oprov)
		tenv := []string{"SSL_CERT_FILE=" + f.ca.File, "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE="}
		mustOprov(t, append(tenv, "OPROV_TOFU="+terraform), "init", "-C", tcfg)
		mustTofu(t, terraform, tcfg, tenv, "apply", "-auto-approve", "-input=false")
		expectHelloOutputs(t, terraform, tcfg, tenv, false)
	})
}

// registryState is every repository:tag below prefix in a registry, with its digest.
func registryState(t *testing.T, reg *testreg.Registry, prefix string) map[string]string {
	t.Helper()
	c := reg.Client(t)
	var cat struct{ Repositories []string }
	getJSON(t, c, reg.URL()+"/v2/_catalog?n=1000", &cat)
	out := map[string]string{}
	for _, repo := range cat.Repositories {
		if !strings.HasPrefix(repo, prefix+"/") {
			continue
		}
		var tags struct{ Tags []string }
		getJSON(t, c, reg.URL()+"/v2/"+repo+"/tags/list", &tags)
		for _, tag := range tags.Tags {
			req, _ := http.NewRequest(http.MethodHead, reg.URL()+"/v2/"+repo+"/manifests/"+tag, nil)
			req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			out[strings.TrimPrefix(repo, prefix+"/")+":"+tag] = resp.Header.Get("Docker-Content-Digest")
		}
	}
	return out
}

func getJSON(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// tarBlobs lists the blob digests a tarball holds.
func tarBlobs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rest, ok := strings.CutPrefix(h.Name, "blobs/"); ok && h.Typeflag == tar.TypeReg {
			out = append(out, strings.Replace(rest, "/", ":", 1))
		}
	}
	sort.Strings(out)
	return out
}

// TestSaveConfigDelta: after the origin publishes a new version of one provider, the bundle made
// against the first one's listing holds that version's blobs and nothing else; loading it on top
// of the first load gives the same tags and digests as loading the first and then a full second
// bundle.
func TestSaveConfigDelta(t *testing.T) {
	f := newAirGapFixture(t)
	dir := t.TempDir()
	first := filepath.Join(dir, "first.tar")
	base := f.save(t, first)
	f.org.AddVersion(t, origin.FakeRelease(t, "hello", "1.1.0", helloPlatforms[0], helloPlatforms[1]), "1.1.0")
	delta := filepath.Join(dir, "delta.tar")
	d := f.save(t, delta, "--since", first+".listing.json")
	full := filepath.Join(dir, "full.tar")
	fl := f.save(t, full)

	inBase := map[string]bool{}
	for _, b := range base.Blobs {
		inBase[b] = true
	}
	var want []string
	for _, b := range d.Blobs {
		if !inBase[b] {
			want = append(want, b)
		}
	}
	got := tarBlobs(t, delta)
	if len(want) == 0 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the delta holds %v, want exactly the blobs the first lacked: %v", got, want)
	}
	for _, p := range d.Providers {
		changed := p.Address == f.org.Address()
		if p.InBundle != changed || changed && p.Version != "1.1.0" {
			t.Errorf("delta lists %+v", p)
		}
	}
	t.Logf("delta bundle blobs (%d): %s", len(got), strings.Join(got, " "))
	fi, _ := os.Stat(full)
	di, _ := os.Stat(delta)
	t.Logf("delta %d bytes, full %d bytes: %.3f of the full bundle", di.Size(), fi.Size(), float64(di.Size())/float64(fi.Size()))
	if len(fl.Omitted) != 0 {
		t.Errorf("a full bundle omitted blobs: %v", fl.Omitted)
	}

	// Loading the delta without its base is refused before anything is written.
	a := testreg.Start(t, testreg.Options{CA: f.ca})
	if r := oprov(t, f.env, "load", delta, "--to", a.Host+"/early"); r.Code != 1 || !strings.Contains(r.Stderr, "load the base first") {
		t.Errorf("a delta loaded without its base: exit %d\n%s", r.Code, r.Stderr)
	} else if a.RepoExists("early/example.com/acme/hello") {
		t.Errorf("a refused delta load wrote to the registry")
	}
	mustOprov(t, f.env, "load", first, "--to", a.Host+"/airgap")
	mustOprov(t, f.env, "load", delta, "--to", a.Host+"/airgap")
	b := testreg.Start(t, testreg.Options{CA: f.ca})
	mustOprov(t, f.env, "load", first, "--to", b.Host+"/airgap")
	mustOprov(t, f.env, "load", full, "--to", b.Host+"/airgap")
	sa, sb := registryState(t, a, "airgap"), registryState(t, b, "airgap")
	if len(sa) == 0 || !reflect.DeepEqual(sa, sb) {
		t.Errorf("base+delta gave\n%v\nbase+full gave\n%v", sa, sb)
	}
	if _, ok := sa[strings.ReplaceAll(f.org.Host, ":", "_")+"/acme/hello:1.1.0"]; !ok {
		t.Errorf("the new version is not in the registry: %v", sa)
	}
}

// TestSaveConfigRefusals: a tampered blob in the bundle, a provider whose origin signature fails,
// and a platform a provider lacks are each refused, naming the cause, before anything is written.
func TestSaveConfigRefusals(t *testing.T) {
	f := newAirGapFixture(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tar")
	f.save(t, good)

	t.Run("origin signature fails", func(t *testing.T) {
		f.org.SetFaults(origin.Faults{BadSignature: true})
		defer f.org.SetFaults(origin.Faults{})
		out := filepath.Join(dir, "badsig.tar")
		r := oprov(t, f.env, "save", "--config", f.cfg, "--to", out, "--platform", helloPlatforms[0])
		if r.Code != 1 || !strings.Contains(r.Stderr, f.org.Address()) || !strings.Contains(r.Stderr, "signature does not verify") {
			t.Errorf("exit %d, stderr %q", r.Code, r.Stderr)
		}
		t.Logf("refused: %s", strings.TrimSpace(r.Stderr))
		assertNothingBeside(t, dir, "badsig")
	})
	t.Run("platform missing", func(t *testing.T) {
		out := filepath.Join(dir, "noplat.tar")
		r := oprov(t, f.env, "save", "--config", f.cfg, "--to", out, "--platform", "freebsd_arm")
		if r.Code != 1 || !strings.Contains(r.Stderr, "example.com/acme/hello") || !strings.Contains(r.Stderr, "no freebsd_arm package") {
			t.Errorf("exit %d, stderr %q", r.Code, r.Stderr)
		}
		t.Logf("refused: %s", strings.TrimSpace(r.Stderr))
		assertNothingBeside(t, dir, "noplat")
	})
	t.Run("tampered blob", func(t *testing.T) {
		data, err := os.ReadFile(good)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/3] ^= 0xff // inside a zip: the tar stays readable
		bad := filepath.Join(dir, "tampered.tar")
		writeFile(t, bad, string(data))
		reg := testreg.Start(t, testreg.Options{CA: f.ca})
		r := oprov(t, f.env, "load", bad, "--to", reg.Host+"/airgap")
		if r.Code != 1 || !strings.Contains(r.Stderr, "nothing was pushed") {
			t.Errorf("exit %d, stderr %q", r.Code, r.Stderr)
		}
		t.Logf("refused: %s", strings.TrimSpace(r.Stderr))
		var cat struct{ Repositories []string }
		getJSON(t, reg.Client(t), reg.URL()+"/v2/_catalog", &cat)
		if len(cat.Repositories) != 0 {
			t.Errorf("a tampered bundle wrote %v", cat.Repositories)
		}
	})
}

func assertNothingBeside(t *testing.T, dir, prefix string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			t.Errorf("a refused save left %s", e.Name())
		}
	}
}
