package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// moduleJSON is what package/push/verify --module print about a module package.
type moduleJSON struct {
	Path     string `json:"path"`
	Manifest string `json:"manifest_digest"`
	Zip      string `json:"zip_digest"`
	H1       string `json:"h1"`
	ZH       string `json:"zh"`
	Source   string `json:"tofu_source"`
}

// writeNetworkModule writes a module that calls a module in a subdirectory, with the dot-entries a
// working copy has (.terraform, .git, a lock file) that a package must leave out. Its output
// names the version, so a configuration shows which version tofu installed.
func writeNetworkModule(t testing.TB, dir, version string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "main.tf"), `variable "name" {
  type    = string
  default = "world"
}

module "greeting" {
  source = "./modules/greeting"
  name   = var.name
}

resource "terraform_data" "marker" {
  input = module.greeting.text
}

output "text" {
  value = "`+version+`: ${terraform_data.marker.output}"
}
`)
	writeFile(t, filepath.Join(dir, "modules/greeting/main.tf"), `variable "name" {
  type = string
}

output "text" {
  value = "hello ${var.name} from a subdirectory module"
}
`)
	writeFile(t, filepath.Join(dir, ".terraform/modules/modules.json"), `{"Modules":[]}`)
	writeFile(t, filepath.Join(dir, ".git/HEAD"), "ref: refs/heads/main\n")
	writeFile(t, filepath.Join(dir, ".terraform.lock.hcl"), "# not part of the module\n")
}

func outputText(t *testing.T, bin, dir string, env []string) string {
	t.Helper()
	var out struct {
		Text struct {
			Value string `json:"value"`
		} `json:"text"`
	}
	tofuJSON(t, bin, dir, env, &out, "output", "-json")
	return out.Text.Value
}

// TestModulePublishSignAndTofuInit: a module with a subdirectory module, packaged twice, gives the
// same digest; pushed and signed, it verifies with oprov (and the stock cosign CLI), a copy carries
// its signature, another key is refused, and plain tofu init + apply installs it from
// source = "oci://...?tag=".
func TestModulePublishSignAndTofuInit(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	reg := testreg.Start(t, testreg.Options{})
	mod := filepath.Join(t.TempDir(), "network")
	writeNetworkModule(t, mod, "1.0.0")
	keys := t.TempDir()
	writeFile(t, filepath.Join(keys, "empty-root.json"), `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
	pass := []string{"COSIGN_PASSWORD=test-password"}
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(keys, "other"))

	var a, b, pushed moduleJSON
	decodeJSON(t, mustOprov(t, nil, "package", "--module", mod, "--version", "1.0.0", "--out-dir", t.TempDir(), "-o", "json").Stdout, &a)
	// The second time from a copy made later: other times, same files.
	other := filepath.Join(t.TempDir(), "network")
	copyDir(t, mod, other)
	decodeJSON(t, mustOprov(t, nil, "package", "--module", other, "--version", "1.0.0", "--out-dir", t.TempDir(), "-o", "json").Stdout, &b)
	if a.Manifest == "" || a.Manifest != b.Manifest || a.ZH != b.ZH || a.H1 != b.H1 {
		t.Fatalf("the same module packaged twice: %+v and %+v", a, b)
	}
	repo := reg.Host + "/modules/network"
	ca := []string{"--ca-file", reg.CAFile}
	decodeJSON(t, mustOprov(t, pass, append([]string{"push", "--module", a.Path, repo + ":1.0.0", "--sign", "--key", filepath.Join(keys, "cosign.key"), "-o", "json"}, ca...)...).Stdout, &pushed)
	if pushed.Manifest != a.Manifest {
		t.Fatalf("pushed as %s, packaged as %s", pushed.Manifest, a.Manifest)
	}
	if want := "oci://" + repo + "?tag=1.0.0"; pushed.Source != want {
		t.Errorf("push printed the source %q, want %q", pushed.Source, want)
	}

	var ver struct {
		Verified bool       `json:"verified"`
		Kind     string     `json:"kind"`
		Module   moduleJSON `json:"module"`
	}
	decodeJSON(t, mustOprov(t, nil, append([]string{"verify", repo + ":1.0.0", "--key", filepath.Join(keys, "cosign.pub"), "-o", "json"}, ca...)...).Stdout, &ver)
	if !ver.Verified || ver.Kind != "module" || ver.Module.H1 != a.H1 || ver.Module.Manifest != a.Manifest {
		t.Fatalf("verify: %+v", ver)
	}
	if out, err := cosignCLI(t, reg, keys, append(cosignVerifyBundle, repo+":1.0.0")...); err != nil {
		t.Fatalf("the stock cosign does not verify oprov's module signature: %v\n%s", err, out)
	}
	// And the other way: the stock cosign signs a module oprov pushed; oprov verifies it.
	var second moduleJSON
	decodeJSON(t, mustOprov(t, nil, append([]string{"push", "--module", mod, repo + ":1.1.0", "-o", "json"}, ca...)...).Stdout, &second)
	if out, err := cosignCLI(t, reg, keys, append(cosignSignBundle, repo+"@"+second.Manifest)...); err != nil {
		t.Fatalf("cosign sign of a module: %v\n%s", err, out)
	}
	mustOprov(t, nil, append([]string{"verify", repo + ":1.1.0", "--key", filepath.Join(keys, "cosign.pub")}, ca...)...)
	r := oprov(t, nil, append([]string{"verify", repo + ":1.0.0", "--key", filepath.Join(keys, "other.pub")}, ca...)...)
	if r.Code != 10 || !strings.Contains(r.Stderr, "none by a trusted key") || !strings.Contains(r.Stderr, a.Manifest) {
		t.Fatalf("verify with another key: exit %d, %s", r.Code, r.Stderr)
	}
	// A copy carries the signature: the copy verifies.
	mustOprov(t, nil, append([]string{"copy", repo + ":1.0.0", reg.Host + "/mirror/network"}, ca...)...)
	mustOprov(t, nil, append([]string{"verify", reg.Host + "/mirror/network:1.0.0", "--key", filepath.Join(keys, "cosign.pub")}, ca...)...)

	// Plain tofu installs it from the registry (trusting the registry's CA) and applies.
	cfg := filepath.Join(t.TempDir(), "cfg")
	writeFile(t, filepath.Join(cfg, "main.tf"), `module "m" {
  source = "oci://`+repo+`?tag=1.0.0"
  name   = "tofu"
}

output "text" {
  value = module.m.text
}
`)
	env := []string{"SSL_CERT_FILE=" + reg.CAFile, "HOME=" + t.TempDir()}
	mustTofu(t, tofu, cfg, env, "init", "-input=false")
	mustTofu(t, tofu, cfg, env, "apply", "-auto-approve", "-input=false")
	if got, want := outputText(t, tofu, cfg, env), "1.0.0: hello tofu from a subdirectory module"; got != want {
		t.Errorf("the module's output: %q, want %q", got, want)
	}
	// What tofu installed is the package's content: no dot-entry came along.
	installed := filepath.Join(cfg, ".terraform/modules/m")
	if _, err := os.Stat(filepath.Join(installed, "modules/greeting/main.tf")); err != nil {
		t.Errorf("the subdirectory module is not installed: %v", err)
	}
	for _, dot := range []string{".git", ".terraform.lock.hcl", ".terraform"} {
		if _, err := os.Stat(filepath.Join(installed, dot)); err == nil {
			t.Errorf("%s came along in the package", dot)
		}
	}
}

// TestModuleRegistryPlainFleet: plain tofu and terraform init + apply a configuration that calls
// only registry modules, through 'oprov serve --modules' and the CLI configuration it printed
// (its host block), with no oprov on their side. Only versions signed by the trusted key are
// offered: an unsigned, higher version is passed over.
func TestModuleRegistryPlainFleet(t *testing.T) {
	reg := testreg.Start(t, testreg.Options{})
	keys := t.TempDir()
	pass := []string{"COSIGN_PASSWORD=test-password"}
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	ca := []string{"--ca-file", reg.CAFile}
	push := func(repo, version string, signed bool) {
		dir := filepath.Join(t.TempDir(), "m")
		writeNetworkModule(t, dir, version)
		args := []string{"push", "--module", dir, reg.Host + "/modules/" + repo + ":" + version}
		if signed {
			args = append(args, "--sign", "--key", filepath.Join(keys, "cosign.key"))
		}
		mustOprov(t, pass, append(args, ca...)...)
	}
	push("acme/network/aws", "1.0.0", true)
	push("acme/network/aws", "1.1.0", true)
	push("acme/network/aws", "1.2.0", false) // meets the constraint, but unsigned
	push("acme/dns/aws", "2.0.0", true)

	s := startServe(t, nil, false, "--modules", reg.Host+"/modules/${namespace}/${name}/${system}",
		"--module-include", "modules.internal/acme/*/*", "--key", filepath.Join(keys, "cosign.pub"),
		"--ca-file", reg.CAFile, "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	if !strings.Contains(s.CLIConfig, `host "modules.internal"`) || !strings.Contains(s.CLIConfig, `"modules.v1" = "`+s.URL) {
		t.Fatalf("serve printed no host block for modules.internal:\n%s", s.CLIConfig)
	}
	const config = `module "net" {
  source  = "modules.internal/acme/network/aws"
  version = ">= 1.0.0, < 2.0.0"
  name    = "fleet"
}

module "dns" {
  source  = "modules.internal/acme/dns/aws"
  version = "~> 2.0"
}

output "text" {
  value = "${module.net.text} | ${module.dns.text}"
}
`
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			work := t.TempDir()
			rc := filepath.Join(work, "modules.tfrc")
			writeFile(t, rc, s.CLIConfig)
			cfg := filepath.Join(work, "cfg")
			writeFile(t, filepath.Join(cfg, "main.tf"), config)
			env := []string{"TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + s.CAFile, "HOME=" + work}
			out := mustTofu(t, bin, cfg, env, "init", "-input=false")
			if !strings.Contains(out, "1.1.0") {
				t.Errorf("init did not install network 1.1.0:\n%s", out)
			}
			mustTofu(t, bin, cfg, env, "apply", "-auto-approve", "-input=false")
			want := "1.1.0: hello fleet from a subdirectory module | 2.0.0: hello world from a subdirectory module"
			if got := outputText(t, bin, cfg, env); got != want {
				t.Errorf("outputs: %q, want %q", got, want)
			}
			var mj struct {
				Modules []struct{ Key, Source, Version string }
			}
			data, err := os.ReadFile(filepath.Join(cfg, ".terraform/modules/modules.json"))
			if err != nil || json.Unmarshal(data, &mj) != nil {
				t.Fatalf("modules.json: %v", err)
			}
			for _, m := range mj.Modules {
				if m.Key == "net" && m.Version != "1.1.0" {
					t.Errorf("modules.json records net %s, want 1.1.0", m.Version)
				}
			}
		})
	}
	// The catalog lists the modules clients asked for (a round starts shortly after a request
	// names a new one), with the unsigned version refused.
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		var code int
		code, _, body = s.get(t, "/?format=json")
		if code == 200 && catalogShowsRefusal(t, body) {
			return
		}
	}
	t.Errorf("the catalog does not show network with 1.2.0 refused by the policy: %s", body)
}

// catalogShowsRefusal reports whether the catalog lists network with two versions and 1.2.0
// refused by the policy.
func catalogShowsRefusal(t *testing.T, body []byte) bool {
	var cat struct {
		Modules []struct {
			Address  string
			Versions []struct{ Version string }
			Refused  []struct{ Version, Reason string }
		}
	}
	if err := json.Unmarshal(body, &cat); err != nil {
		t.Fatalf("catalog: %v %s", err, body)
	}
	for _, m := range cat.Modules {
		if m.Address == "modules.internal/acme/network/aws" {
			return len(m.Versions) == 2 && len(m.Refused) == 1 && m.Refused[0].Version == "1.2.0" && m.Refused[0].Reason == "policy"
		}
	}
	return false
}
