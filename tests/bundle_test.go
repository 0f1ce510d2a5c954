package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	origin "github.com/oprov/oprov/internal/testorigin"
	"github.com/oprov/oprov/tests/internal/peers"
	"github.com/oprov/oprov/tests/internal/testreg"
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
}
