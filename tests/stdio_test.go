package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// kvConfig uses the kv example (examples/stdio-*): an entry whose value depends on another's
// computed id, an imported entry, a data source read after them and the function.
const kvConfig = `terraform {
  required_providers {
    kv = { source = "example.com/acme/kv" }
  }
}
provider "kv" { path = "%[1]s" }
variable "key" { default = "a" }
variable "value" { default = "one" }
resource "kv_entry" "a" {
  key   = var.key
  value = var.value
}
resource "kv_entry" "b" {
  key   = "b"
  value = kv_entry.a.id
}
import {
  to = kv_entry.seed
  id = "seed"
}
resource "kv_entry" "seed" {
  key   = "seed"
  value = "planted"
}
data "kv_keys" "all" {
  depends_on = [kv_entry.b, kv_entry.seed]
}
output "a" { value = [kv_entry.a.id, tostring(kv_entry.a.revision)] }
output "b" { value = kv_entry.b.value }
output "keys" { value = join(",", data.kv_keys.all.keys) }
%[2]s`

const kvFunctionOutput = `output "fn" { value = provider::kv::entry_id("zz") }
`

// stdioDir copies a provider directory beside a new configuration and returns the configuration
// directory, the kv database path and the environment for oprov.
func stdioDir(t *testing.T, provider, addr, tf string) (cfg string, env []string) {
	t.Helper()
	cfg = t.TempDir()
	if err := os.CopyFS(filepath.Join(cfg, "p"), os.DirFS(provider)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), tf)
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), fmt.Sprintf("provider %q {\n  source = \"./p\"\n}\n", addr))
	env = []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1", "HOME=" + t.TempDir(), "TF_CLI_ARGS=-no-color"}
	return cfg, env
}

// boundedOprov runs oprov, killing it after limit: nothing may hang.
func boundedOprov(t *testing.T, limit time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, oprovBin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("oprov %s did not end within %s:\n%s", strings.Join(args, " "), limit, out)
	}
	r := result{Stdout: string(out)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func readKV(t *testing.T, path string) map[string]struct {
	Value    string
	Revision int
} {
	t.Helper()
	var db map[string]struct {
		Value    string
		Revision int
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, string(b), &db)
	return db
}

// expectIn checks that out says each of wants, whitespace aside (tofu wraps its diagnostics).
func expectIn(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	flat := strings.Join(strings.Fields(out), " ")
	for _, w := range wants {
		if !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
			t.Errorf("%s does not say %q:\n%s", what, w, out)
		}
	}
}

// Each example, kept as source, through oprov run with real tofu: create (with an input known
// only after apply), import, a data source, a function, update in place, replacement, destroy.
func TestStdioExamplesWithTofu(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	for _, ex := range []string{"stdio-python", "stdio-js", "stdio-sh"} {
		t.Run(ex, func(t *testing.T) {
			if _, err := exec.LookPath("jq"); err != nil && ex == "stdio-sh" {
				peers.Missing(t, "jq (for examples/stdio-sh)")
			}
			db := filepath.Join(t.TempDir(), "kv.json")
			writeFile(t, db, `{"seed": {"value": "planted", "revision": 7}}`)
			cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", ex), "example.com/acme/kv", fmt.Sprintf(kvConfig, db, kvFunctionOutput))
			apply := func(vars ...string) string {
				args := append([]string{"run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false"}, vars...)
				return boundedOprov(t, 3*time.Minute, env, args...).Stdout
			}
			out := apply()
			expectIn(t, "the first apply", out, "value    = (known after apply)", "Apply complete! Resources: 1 imported, 2 added, 0 changed, 0 destroyed.")
			var outputs map[string]struct{ Value any }
			tofuJSON(t, tofu, cfg, env, &outputs, "output", "-json")
			got, _ := json.Marshal(map[string]any{"a": outputs["a"].Value, "b": outputs["b"].Value, "keys": outputs["keys"].Value, "fn": outputs["fn"].Value})
			if want := `{"a":["kv:a","1"],"b":"kv:a","fn":"kv:zz","keys":"a,b,seed"}`; string(got) != want {
				t.Errorf("outputs %s, want %s", got, want)
			}
			if readKV(t, db)["seed"].Revision != 7 {
				t.Errorf("the import changed the entry: %+v", readKV(t, db))
			}
			out = apply("-var", "value=two")
			expectIn(t, "the update", out, "~ update in-place", "Resources: 0 added, 1 changed, 0 destroyed.")
			if e := readKV(t, db)["a"]; e.Value != "two" || e.Revision != 2 {
				t.Errorf("after the update, a = %+v, want value two at revision 2", e)
			}
			out = apply("-var", "value=two", "-var", "key=c")
			expectIn(t, "the replacement", out, "# forces replacement", "Resources: 1 added, 1 changed, 1 destroyed.")
			if e := readKV(t, db); e["c"].Value != "two" || e["b"].Value != "kv:c" || len(e) != 3 {
				t.Errorf("after the replacement, the database is %+v", e)
			}
			out = boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", tofu, "destroy", "-auto-approve", "-input=false", "-var", "key=c").Stdout
			expectIn(t, "destroy", out, "Resources: 3 destroyed.")
			if e := readKV(t, db); len(e) != 0 {
				t.Errorf("after destroy, the database is %+v", e)
			}
		})
	}
}

// The Python example with Terraform 1.5.7 (which has no provider functions).
func TestStdioPythonWithTerraform(t *testing.T) {
	terraform := peers.Require(t, "terraform")
	db := filepath.Join(t.TempDir(), "kv.json")
	writeFile(t, db, `{"seed": {"value": "planted", "revision": 7}}`)
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", fmt.Sprintf(kvConfig, db, ""))
	out := boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", terraform, "apply", "-auto-approve", "-input=false").Stdout
	expectIn(t, "terraform apply", out, "Resources: 1 imported, 2 added, 0 changed, 0 destroyed.", `keys = "a,b,seed"`)
	out = boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", terraform, "apply", "-auto-approve", "-input=false", "-var", "key=z").Stdout
	expectIn(t, "terraform replacement", out, "# forces replacement", "Resources: 1 added, 1 changed, 1 destroyed.")
}

// oprov schema of a stdio provider directory prints the schema tofu sees through oprov run.
func TestStdioSchemaMatchesTofu(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	db := filepath.Join(t.TempDir(), "kv.json")
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", fmt.Sprintf(kvConfig, db, kvFunctionOutput))
	var mine, theirs struct {
		ProviderSchemas map[string]json.RawMessage `json:"provider_schemas"`
	}
	decodeJSON(t, mustOprov(t, env, "schema", filepath.Join(cfg, "p"), "--address", "example.com/acme/kv", "-o", "json").Stdout, &mine)
	mustOprov(t, env, "run", "-C", cfg, "--", tofu, "init", "-input=false")
	decodeJSON(t, mustOprov(t, env, "run", "-C", cfg, "--", tofu, "providers", "schema", "-json").Stdout, &theirs)
	var a, b map[string]any
	json.Unmarshal(mine.ProviderSchemas["example.com/acme/kv"], &a)
	json.Unmarshal(theirs.ProviderSchemas["example.com/acme/kv"], &b)
	// Functions too, though oprov leaves empty descriptions out where tofu writes "".
	for _, f := range []map[string]any{a, b} {
		if fn, _ := f["functions"].(map[string]any); fn["entry_id"] == nil {
			t.Errorf("no function entry_id in %v", f["functions"])
		}
	}
	for _, part := range []string{"provider", "resource_schemas", "data_source_schemas"} {
		x, _ := json.Marshal(a[part])
		y, _ := json.Marshal(b[part])
		if string(x) != string(y) || string(x) == "null" {
			t.Errorf("%s: oprov schema says\n%s\ntofu says\n%s", part, x, y)
		}
	}
}

// TestStdioUnderSandbox: a stdio provider kept as source runs under a sandbox block like any
// provider: its host, interpreter and directory allowed by default, the database's directory
// only when the block names it (so the sandbox is really there).
func TestStdioUnderSandbox(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	data := t.TempDir()
	db := filepath.Join(data, "kv.json")
	writeFile(t, db, `{"seed": {"value": "planted", "revision": 7}}`)
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", fmt.Sprintf(kvConfig, db, ""))
	hcl := mustRead(t, filepath.Join(cfg, "oprov.hcl"))
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), hcl+"sandbox \"*\" {}\n")
	r := oprov(t, env, "run", "-v", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if r.Code == 0 || !strings.Contains(r.Stderr, `under sandbox "*" at `) {
		t.Fatalf("a database outside the sandbox was written: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), hcl+fmt.Sprintf("sandbox \"*\" {\n  write = [%q]\n}\n", data))
	out := boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false").Stdout
	expectIn(t, "apply under the sandbox", out, "Resources: 1 imported, 2 added, 0 changed, 0 destroyed.")
}
