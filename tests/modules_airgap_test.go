package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testca"
	origin "github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// TestModulesAcrossAirGapWithTofu: a configuration whose root calls a registry module (which
// calls a git module), a git module, an HTTP archive and a signed oci:// module, two of them
// requiring providers the root does not name (one from OCI, signed; one from an origin registry),
// is locked and bundled with save --config; every server stops; load pushes the bundle into a
// second registry; with the .tf files unchanged and only the printed oprov.hcl (its trust given
// the signing key), oprov init installs every module from that registry and tofu apply works.
func TestModulesAcrossAirGapWithTofu(t *testing.T) {
	testModulesAcrossAirGap(t, peers.Require(t, "tofu"), true)
}

// TestModulesAcrossAirGapWithTerraform: the same with Terraform 1.5.7 (no oci:// module).
func TestModulesAcrossAirGapWithTerraform(t *testing.T) {
	testModulesAcrossAirGap(t, peers.Require(t, "terraform"), false)
}

func testModulesAcrossAirGap(t *testing.T, bin string, withOCI bool) {
	f := newModuleFixture(t, withOCI)
	caFile := envValue(f.env, "SSL_CERT_FILE")
	// An origin registry for a provider only the HTTP archive module "dns" requires.
	oca := testca.NewCA(t, t.TempDir())
	appendCA(t, caFile, oca.File)
	org := origin.Start(t, oca, helloRelease(t), "acme", "hello", "1.0.0")
	f.mods.put(t, "/archives/dns.tar.gz", map[string]string{"main.tf": "terraform {\n  required_providers {\n    greet = {\n      source = \"" + org.Address() + "\"\n    }\n  }\n}\n\noutput \"zone\" {\n  value = \"example.internal\"\n}\n"})
	main, _ := os.ReadFile(filepath.Join(f.cfg, "main.tf"))
	writeFile(t, filepath.Join(f.cfg, "main.tf"), string(main)+"\nmodule \"dns\" {\n  source = \"https://"+f.mods.host()+"/archives/dns.tar.gz\"\n}\n\noutput \"zone\" {\n  value = module.dns.zone\n}\n")

	mustOprov(t, f.env, "lock", "-C", f.cfg)
	tarball := filepath.Join(t.TempDir(), "deps.tar")
	r := mustOprov(t, f.env, "save", "--config", f.cfg, "--to", tarball, "--platform", "linux_amd64", "-o", "json")
	var saved struct {
		Providers []struct{ Address string }
		Modules   []struct{ Call string }
	}
	decodeJSON(t, r.Stdout, &saved)
	want := 5
	if withOCI {
		want++
	}
	if len(saved.Modules) != want || len(saved.Providers) != 2 {
		t.Fatalf("the bundle holds modules %+v and providers %+v; want %d modules and both providers", saved.Modules, saved.Providers, want)
	}

	// Across the gap: every server stops; the bundle goes into a second registry.
	f.mods.reg.Close()
	f.mods.git.Close()
	org.Stop()
	f.reg.Stop()
	far := testreg.Start(t, testreg.Options{})
	appendCA(t, caFile, far.CAFile)
	to := far.Host + "/airgap"
	r = mustOprov(t, f.env, "load", tarball, "--to", to, "-o", "json")
	var loaded struct {
		OprovHCL string `json:"oprov_hcl"`
	}
	decodeJSON(t, r.Stdout, &loaded)
	if !strings.Contains(loaded.OprovHCL, "module_mirror {") || !strings.Contains(loaded.OprovHCL, `repository_prefix = "`+to+`"`) {
		t.Fatalf("load printed no module_mirror block:\n%s", loaded.OprovHCL)
	}

	// The far side: the .tf files and the lock files as they were, oprov.hcl as load printed it,
	// trusting the key the OCI provider and module were signed with.
	dir := f.freshCopy(t)
	hcl := strings.Replace(loaded.OprovHCL, "include ", "public_keys = [\""+filepath.Join(f.keys, "cosign.pub")+"\"]\n  include ", 1)
	// Control: without the module_mirror block, init has only the stopped origins, and fails.
	i := strings.Index(hcl, "oci_mirror {")
	writeFile(t, filepath.Join(dir, "oprov.hcl"), hcl[i:])
	if c := oprov(t, append(f.env, "OPROV_TOFU="+bin), "init", "-C", dir); c.Code == 0 || !strings.Contains(c.Stderr, "module.") {
		t.Fatalf("control: init without module_mirror: exit %d\n%s", c.Code, c.Stderr)
	}
	writeFile(t, filepath.Join(dir, "oprov.hcl"), hcl)
	out := mustOprov(t, append(f.env, "OPROV_TOFU="+bin), "init", "-C", dir)
	if strings.Contains(out.Stdout, "Downloading") {
		t.Errorf("%s init downloaded modules oprov had installed:\n%s", filepath.Base(bin), out.Stdout)
	}
	recs := readModulesJSON(t, dir)
	if recs["vpc"].Version != "1.1.0" || recs["vpc.net"].Source == "" || recs["dns"].Dir != ".terraform/modules/dns" {
		t.Errorf("modules.json: %+v", recs)
	}
	mustTofu(t, bin, dir, f.env, "apply", "-auto-approve", "-input=false")
	var outputs map[string]struct{ Value string }
	tofuJSON(t, bin, dir, f.env, &outputs, "output", "-json")
	if outputs["vpc"].Value != "1.1.0/net/net" || outputs["message"].Value != "Hello, modules!" || outputs["zone"].Value != "example.internal" {
		t.Errorf("outputs %+v", outputs)
	}
	if withOCI && outputs["store"].Value != "oci" {
		t.Errorf("outputs %+v", outputs)
	}
}

// envValue gives NAME's value in an environment list.
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// appendCA adds a CA's PEM to a bundle of CAs.
func appendCA(t *testing.T, bundle, ca string) {
	t.Helper()
	a, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, bundle, string(a)+string(b))
}
