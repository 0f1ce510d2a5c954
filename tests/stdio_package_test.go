package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

const kvPackagedConfig = `terraform {
  required_providers {
    kv = {
      source  = "example.com/acme/kv"
      version = "0.1.0"
    }
  }
}
provider "kv" { path = "%s" }
resource "kv_entry" "a" {
  key   = "a"
  value = "packaged"
}
output "id" { value = kv_entry.a.id }
output "fn" { value = provider::kv::entry_id("p") }
`

// stdioPackaged packages an example (this machine's platform and one other), pushes it
// signed to a TLS registry as example.com/acme/kv 0.1.0, and returns a configuration managing it
// through oci_mirror, the kv database, and oprov's environment with oprov on PATH.
func stdioPackaged(t *testing.T, example string) (cfg, db string, env []string) {
	t.Helper()
	reg := testreg.Start(t, testreg.Options{})
	keys, dist := t.TempDir(), t.TempDir()
	env = []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "SSL_CERT_FILE=" + reg.CAFile, "COSIGN_PASSWORD=test",
		"HOME=" + t.TempDir(), "TF_CLI_ARGS=-no-color", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=",
		"PATH=" + filepath.Dir(oprovBin) + string(os.PathListSeparator) + os.Getenv("PATH")}
	other := "darwin_arm64"
	if runtime.GOOS+"_"+runtime.GOARCH == other {
		other = "linux_amd64"
	}
	mustOprov(t, env, "package", "--stdio", filepath.Join(repoRoot, "examples", example), "--version", "0.1.0",
		"--out-dir", dist, "--platform", runtime.GOOS+"_"+runtime.GOARCH, "--platform", other)
	mustOprov(t, env, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	pushJSON(t, env, dist, reg.Host+"/providers/acme/kv", "--address", "example.com/acme/kv", "--sign", "--key", filepath.Join(keys, "cosign.key"))
	cfg = t.TempDir()
	db = filepath.Join(t.TempDir(), "kv.json")
	writeFile(t, filepath.Join(cfg, "main.tf"), fmt.Sprintf(kvPackagedConfig, db))
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", reg.Host, "%KEYS%", keys).Replace(oprovHCL))
	return cfg, db, env
}

// The packaged Python example from OCI: through oprov run; through oprov init then plain tofu
// apply; through plain tofu init (oci_mirror) and apply with oprov on PATH; and without oprov on
// PATH, tofu says what is missing.
func TestStdioPackagedWithTofu(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	cfg, db, env := stdioPackaged(t, "stdio-python")
	check := func(how, out string) {
		t.Helper()
		expectIn(t, how, out, `id = "kv:a"`, `fn = "kv:p"`)
		if e := readKV(t, db)["a"]; e.Value != "packaged" {
			t.Errorf("%s: the database holds %+v", how, readKV(t, db))
		}
		os.Remove(db)
	}
	r := boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	check("oprov run", r.Stdout)

	t.Run("oprov init, then plain tofu apply", func(t *testing.T) {
		dir := t.TempDir()
		for _, name := range []string{"main.tf", "oprov.hcl"} {
			data, _ := os.ReadFile(filepath.Join(cfg, name))
			writeFile(t, filepath.Join(dir, name), string(data))
		}
		mustOprov(t, append(env, "OPROV_TOFU="+tofu), "init", "-C", dir)
		check("plain tofu apply", mustTofu(t, tofu, dir, env, "apply", "-auto-approve", "-input=false"))
	})

	t.Run("plain tofu init through oci_mirror", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "main.tf"), fmt.Sprintf(kvPackagedConfig, db))
		rc := filepath.Join(t.TempDir(), "tofurc")
		writeFile(t, rc, mustOprov(t, env, "tofurc", "-C", cfg).Stdout)
		tenv := append(env, "TF_CLI_CONFIG_FILE="+rc)
		mustTofu(t, tofu, dir, tenv, "init", "-input=false")
		check("plain tofu init + apply", mustTofu(t, tofu, dir, tenv, "apply", "-auto-approve", "-input=false"))

		// Without oprov on PATH the launcher says so, and tofu quotes it.
		bare := append(tenv, "PATH=/usr/bin:/bin")
		out, err := tofuRun(t, tofu, dir, bare, "plan", "-input=false")
		if err == nil {
			t.Fatalf("tofu plan without oprov on PATH succeeded:\n%s", out)
		}
		expectIn(t, "tofu without oprov", out, "terraform-provider-kv: this provider runs under oprov, and no 'oprov' is on PATH")
	})
}

// The packaged JavaScript example from OCI through oprov run.
func TestStdioPackagedJSWithTofu(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	cfg, db, env := stdioPackaged(t, "stdio-js")
	r := boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	expectIn(t, "oprov run", r.Stdout, `id = "kv:a"`, `fn = "kv:p"`)
	if e := readKV(t, db)["a"]; e.Value != "packaged" {
		t.Errorf("the database holds %+v", readKV(t, db))
	}
}

// The packaged Python example with Terraform 1.5.7: oprov init puts it where Terraform finds it,
// then plain terraform apply starts it, and its launcher hands over to the oprov on PATH.
func TestStdioPackagedWithTerraform(t *testing.T) {
	terraform := peers.Require(t, "terraform")
	cfg, db, env := stdioPackaged(t, "stdio-python")
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(fmt.Sprintf(kvPackagedConfig, db), `output "fn" { value = provider::kv::entry_id("p") }`, "", 1))
	mustOprov(t, append(env, "OPROV_TOFU="+terraform), "init", "-C", cfg)
	out := mustTofu(t, terraform, cfg, env, "apply", "-auto-approve", "-input=false")
	expectIn(t, "terraform apply", out, `id = "kv:a"`)
	if e := readKV(t, db)["a"]; e.Value != "packaged" {
		t.Errorf("the database holds %+v", readKV(t, db))
	}
}
