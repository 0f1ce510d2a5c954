package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testmodreg"
	origin "github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// moduleZip packages a module directory written from files (name -> content).
func moduleZip(t testing.TB, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	z, err := modulepkg.Zip(dir)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// lockModules writes the configuration's module lock as `oprov lock` records it (module.Walk,
// then Lock.Record; `oprov lock` itself wants an oprov.hcl with something to manage).
func lockModules(t testing.TB, cfg, caFile string) {
	t.Helper()
	lock, err := module.ReadLock(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := module.Walk(context.Background(), cfg, module.Options{Lock: lock, CAFile: caFile, Registry: oci.NewClient(oci.Options{CAFile: caFile})})
	if err != nil {
		t.Fatal(err)
	}
	lock.Record(tree)
	if err := lock.Write(); err != nil {
		t.Fatal(err)
	}
}

// TestSaveConfigModulesAcrossAirGap: a configuration calls a registry module from a module
// registry on 127.0.0.1, which calls a second one and requires a provider the root does not name
// (from an origin registry). save --config carries both modules as module packages and that
// provider; with every server stopped, load pushes them into a second registry, each a module
// package whose zip is the one locked, and plain tofu init installs one from the printed oci://
// source.
func TestSaveConfigModulesAcrossAirGap(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	ca := testreg.NewCA(t, t.TempDir())
	env := []string{"SSL_CERT_FILE=" + ca.File, "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE=", "CHECKPOINT_DISABLE=1"}
	org := origin.Start(t, ca, helloRelease(t), "acme", "hello", "1.0.0")
	reg := testmodreg.Start(t, ca)
	dns := reg.Add("acme/dns/aws", "1.0.0", moduleZip(t, map[string]string{"main.tf": "output \"zone\" {\n  value = \"example.internal\"\n}\n"}))
	net := reg.Add("acme/net/aws", "2.1.0", moduleZip(t, map[string]string{
		"main.tf":             fmt.Sprintf("module \"dns\" {\n  source  = %q\n  version = \"1.0.0\"\n}\n\nterraform {\n  required_providers {\n    hello = {\n      source = %q\n    }\n  }\n}\n", dns, org.Address()),
		"modules/sub/main.tf": "variable \"x\" {\n  default = 1\n}\n",
	}))
	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "main.tf"), fmt.Sprintf("module \"net\" {\n  source  = %q\n  version = \"~> 2.0\"\n}\n", net))
	lockModules(t, cfg, ca.File)

	tarball := filepath.Join(t.TempDir(), "deps.tar")
	r := mustOprov(t, env, "save", "--config", cfg, "--to", tarball, "--platform", helloPlatforms[0], "-o", "json")
	var saved struct {
		Providers []struct{ Address string }
		Modules   []struct {
			Call, Source, Version, Repository, Tag, H1, ZH string
			VersionFrom                                    string `json:"version_from"`
			Manifest                                       string `json:"manifest_digest"`
		}
	}
	decodeJSON(t, r.Stdout, &saved)
	if len(saved.Providers) != 1 || saved.Providers[0].Address != org.Address() {
		t.Errorf("the bundle's providers: %+v, want the one the remote module requires", saved.Providers)
	}
	if len(saved.Modules) != 2 || saved.Modules[0].Call != "module.net" || saved.Modules[1].Call != "module.net.module.dns" ||
		saved.Modules[0].Version != "2.1.0" || saved.Modules[0].VersionFrom != "module lock" {
		t.Fatalf("the bundle's modules: %+v", saved.Modules)
	}

	reg.Stop()
	org.Stop()
	airgapped := testreg.Start(t, testreg.Options{CA: ca})
	to := airgapped.Host + "/airgap"
	r = mustOprov(t, env, "load", tarball, "--to", to, "-o", "json")
	var loaded struct {
		Modules []struct {
			Call      string
			OCISource string `json:"oci_source"`
		}
		ServeModules [][]string `json:"serve_modules"`
	}
	decodeJSON(t, r.Stdout, &loaded)
	if len(loaded.Modules) != 2 || len(loaded.ServeModules) != 1 {
		t.Fatalf("load printed %s", r.Stdout)
	}
	for _, m := range saved.Modules {
		dst, err := oci.NewClient(oci.Options{CAFile: ca.File}).Open(context.Background(), oci.Ref{Registry: airgapped.Host, Repository: "airgap/" + m.Repository}, false)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modulepkg.Resolve(context.Background(), dst, m.Tag)
		if err != nil {
			t.Fatalf("%s: %v", m.Call, err)
		}
		zip, err := f.FetchZip(context.Background(), dst, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", m.Call, err)
		}
		h1, zh, _ := modulepkg.Hashes(zip)
		if h1 != m.H1 || zh != m.ZH || f.Manifest.Digest.String() != m.Manifest || f.Parsed.Annotations[modulepkg.AnnotationSource] == "" {
			t.Errorf("%s: loaded %s %s %s %v, saved %s %s %s", m.Call, h1, zh, f.Manifest.Digest, f.Parsed.Annotations, m.H1, m.ZH, m.Manifest)
		}
	}
	// Plain tofu installs the loaded dns module from its printed oci:// source.
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "main.tf"), fmt.Sprintf("module \"dns\" {\n  source = %q\n}\n\noutput \"zone\" {\n  value = module.dns.zone\n}\n", loaded.Modules[1].OCISource))
	mustTofu(t, tofu, work, env, "init", "-input=false")
	mustTofu(t, tofu, work, env, "apply", "-auto-approve", "-input=false")
	out := mustTofu(t, tofu, work, env, "output", "-raw", "zone")
	if strings.TrimSpace(out) != "example.internal" {
		t.Errorf("the module tofu installed from the loaded package gives %q", out)
	}
	if _, err := os.Stat(filepath.Join(work, ".terraform", "modules", "dns", "main.tf")); err != nil {
		t.Errorf("tofu did not install the module: %v", err)
	}

	// A plain fleet: tofu, with the .tf file unchanged (the registry address of the module
	// registry, now stopped), through oprov serve started with the arguments load printed and
	// the host block serve printed.
	args := append(loaded.ServeModules[0], "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	s := startServe(t, []string{"SSL_CERT_FILE=" + ca.File}, false, args...)
	fleet := t.TempDir()
	writeFile(t, filepath.Join(fleet, "tofurc"), s.CLIConfig)
	writeFile(t, filepath.Join(fleet, "cfg", "main.tf"), fmt.Sprintf("module \"dns\" {\n  source  = %q\n  version = \"1.0.0\"\n}\n\noutput \"zone\" {\n  value = module.dns.zone\n}\n", dns))
	fenv := []string{"TF_CLI_CONFIG_FILE=" + filepath.Join(fleet, "tofurc"), "SSL_CERT_FILE=" + s.CAFile, "HOME=" + fleet}
	mustTofu(t, tofu, filepath.Join(fleet, "cfg"), fenv, "init", "-input=false")
	mustTofu(t, tofu, filepath.Join(fleet, "cfg"), fenv, "apply", "-auto-approve", "-input=false")
	if out := mustTofu(t, tofu, filepath.Join(fleet, "cfg"), fenv, "output", "-raw", "zone"); strings.TrimSpace(out) != "example.internal" {
		t.Errorf("through oprov serve, the module gives %q", out)
	}
}

// TestSaveConfigModulesDelta: after one module's new version, a delta holds that version's
// blobs only (its zip and manifest), and loading it on top of the first bundle gives the same
// registry as loading the first and then a full bundle.
func TestSaveConfigModulesDelta(t *testing.T) {
	ca := testreg.NewCA(t, t.TempDir())
	env := []string{"SSL_CERT_FILE=" + ca.File, "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE="}
	reg := testmodreg.Start(t, ca)
	dns := reg.Add("acme/dns/aws", "1.0.0", moduleZip(t, map[string]string{"main.tf": "# dns 1.0.0\n"}))
	net := reg.Add("acme/net/aws", "1.0.0", moduleZip(t, map[string]string{"main.tf": "# net 1.0.0\n"}))
	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "main.tf"), fmt.Sprintf("module \"net\" {\n  source  = %q\n  version = \"~> 1.0\"\n}\n\nmodule \"dns\" {\n  source  = %q\n  version = \"1.0.0\"\n}\n", net, dns))
	lockModules(t, cfg, ca.File)
	dir := t.TempDir()
	first, delta, full := filepath.Join(dir, "first.tar"), filepath.Join(dir, "delta.tar"), filepath.Join(dir, "full.tar")
	var base struct{ Blobs []string }
	decodeJSON(t, mustOprov(t, env, "save", "--config", cfg, "--to", first, "-o", "json").Stdout, &base)

	reg.Add("acme/net/aws", "1.1.0", moduleZip(t, map[string]string{"main.tf": "# net 1.1.0\n"}))
	os.Remove(filepath.Join(cfg, module.LockFileName))
	lockModules(t, cfg, ca.File) // as 'oprov lock -upgrade' would: net moves to 1.1.0
	var d struct {
		Modules []struct {
			Call, Version string
			InBundle      bool `json:"in_bundle"`
		}
		Blobs []string
	}
	decodeJSON(t, mustOprov(t, env, "save", "--config", cfg, "--to", delta, "--since", first+".listing.json", "-o", "json").Stdout, &d)
	mustOprov(t, env, "save", "--config", cfg, "--to", full)
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
	if len(want) != 2 || fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
		t.Errorf("the delta holds %v, want exactly net 1.1.0's zip and manifest: %v", got, want)
	}
	if len(d.Modules) != 2 || d.Modules[0].Version != "1.1.0" || !d.Modules[0].InBundle || d.Modules[1].InBundle {
		t.Errorf("the delta lists %+v", d.Modules)
	}

	reg.Stop()
	a, b := testreg.Start(t, testreg.Options{CA: ca}), testreg.Start(t, testreg.Options{CA: ca})
	r := mustOprov(t, env, "load", first, "--to", a.Host+"/airgap")
	if !strings.Contains(r.Stdout, "oci://"+a.Host+"/airgap/modules/") {
		t.Errorf("load printed no oci:// source for the modules:\n%s", r.Stdout)
	}
	mustOprov(t, env, "load", delta, "--to", a.Host+"/airgap")
	mustOprov(t, env, "load", first, "--to", b.Host+"/airgap")
	mustOprov(t, env, "load", full, "--to", b.Host+"/airgap")
	sa, sb := registryState(t, a, "airgap"), registryState(t, b, "airgap")
	if len(sa) != 3 || fmt.Sprint(sa) != fmt.Sprint(sb) {
		t.Errorf("base+delta gave\n%v\nbase+full gave\n%v", sa, sb)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// TestSaveConfigSignedOCIModule: an oci:// module, pushed and signed with cosign's key, travels
// as its own package with its signature: after load into a second registry (the first stopped),
// load --key verifies it, and so does oprov verify there.
func TestSaveConfigSignedOCIModule(t *testing.T) {
	ca := testreg.NewCA(t, t.TempDir())
	connected := testreg.Start(t, testreg.Options{CA: ca})
	env := []string{"SSL_CERT_FILE=" + ca.File, "COSIGN_PASSWORD=test-password", "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE="}
	keys := t.TempDir()
	mustOprov(t, env, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	mod := t.TempDir()
	writeFile(t, filepath.Join(mod, "main.tf"), "output \"zone\" {\n  value = \"signed\"\n}\n")
	repo := connected.Host + "/modules/net"
	mustOprov(t, env, "push", "--module", mod, repo+":1.0.0", "--sign", "--key", filepath.Join(keys, "cosign.key"))
	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "main.tf"), "module \"net\" {\n  source = \"oci://"+repo+"?tag=1.0.0\"\n}\n")
	lockModules(t, cfg, ca.File)
	tarball := filepath.Join(t.TempDir(), "deps.tar")
	var saved struct {
		Modules []struct{ Repository, Tag, Version string }
	}
	decodeJSON(t, mustOprov(t, env, "save", "--config", cfg, "--to", tarball, "-o", "json").Stdout, &saved)
	if len(saved.Modules) != 1 || !strings.HasPrefix(saved.Modules[0].Version, "sha256:") {
		t.Fatalf("saved %+v", saved.Modules)
	}
	connected.Stop()
	airgapped := testreg.Start(t, testreg.Options{CA: ca})
	to := airgapped.Host + "/airgap"
	other := t.TempDir()
	mustOprov(t, env, "keygen", "--output-key-prefix", filepath.Join(other, "cosign"))
	if r := oprov(t, env, "load", tarball, "--to", to, "--key", filepath.Join(other, "cosign.pub")); r.Code == 0 || airgapped.RepoExists("airgap/"+saved.Modules[0].Repository) {
		t.Errorf("load --key with another key: exit %d, and the module is there: %v\n%s", r.Code, airgapped.RepoExists("airgap/"+saved.Modules[0].Repository), r.Stderr)
	}
	mustOprov(t, env, "load", tarball, "--to", to, "--key", filepath.Join(keys, "cosign.pub"))
	mustOprov(t, env, "verify", to+"/"+saved.Modules[0].Repository+":"+saved.Modules[0].Tag, "--key", filepath.Join(keys, "cosign.pub"))
}
