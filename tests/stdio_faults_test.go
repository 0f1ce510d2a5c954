package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

const faultsConfig = `terraform {
  required_providers {
    faults = { source = "example.com/acme/faults" }
  }
}
variable "mode" { default = "ok" }
resource "faults_thing" "first" {
  mode = "ok"
}
resource "faults_thing" "second" {
  depends_on = [faults_thing.first]
  mode       = var.mode
}
`

// showJSON reads tofu show -json, run under oprov (tofu needs the provider's schema).
func showJSON(t *testing.T, tofu, cfg string, env []string, v any) {
	t.Helper()
	r := mustOprov(t, env, "run", "-C", cfg, "--", tofu, "show", "-json")
	decodeJSON(t, r.Stdout, v)
}

// stateAddresses lists the resources tofu's state holds.
func stateAddresses(t *testing.T, tofu, cfg string, env []string) []string {
	t.Helper()
	var st struct {
		Values struct {
			RootModule struct {
				Resources []struct{ Address string }
			} `json:"root_module"`
		}
	}
	showJSON(t, tofu, cfg, env, &st)
	var out []string
	for _, r := range st.Values.RootModule.Resources {
		out = append(out, r.Address)
	}
	return out
}

// A provider that exits mid-apply, writes garbage on stdout or never answers: each is a clear
// diagnostic in tofu, nothing hangs, and the state keeps what was applied before.
func TestStdioFaults(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	for mode, wants := range map[string][]string{
		"exit":    {`stdio provider "faults" (python3 provider.py) exit status 3`, "creating a thing in mode exit"},
		"garbage": {"not a JSON-RPC 2.0 message on stdout", `"this is not JSON-RPC"`},
		"hang":    {"did not answer create within 3s", "OPROV_STDIO_TIMEOUT"},
	} {
		t.Run(mode, func(t *testing.T) {
			cfg, env := stdioDir(t, filepath.Join(repoRoot, "tests", "providers", "stdio-faults"), "example.com/acme/faults", faultsConfig)
			env = append(env, "OPROV_STDIO_TIMEOUT=3s")
			start := time.Now()
			r := boundedOprov(t, 2*time.Minute, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false", "-var", "mode="+mode)
			if r.Code == 0 {
				t.Fatalf("the apply succeeded:\n%s", r.Stdout)
			}
			expectIn(t, "the failed apply", r.Stdout, append(wants, "Error: ", "with faults_thing.second")...)
			t.Logf("%s: failed in %s", mode, time.Since(start).Round(time.Millisecond))
			if got := strings.Join(stateAddresses(t, tofu, cfg, env), ","); got != "faults_thing.first" {
				t.Errorf("state holds %q, want only faults_thing.first", got)
			}
		})
	}
}

// A provider whose schema is invalid is refused on tofu's first call with what is wrong.
func TestStdioInvalidSchema(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "tests", "providers", "stdio-faults"), "example.com/acme/faults", faultsConfig)
	r := boundedOprov(t, 2*time.Minute, append(env, "FAULTS_BAD_SCHEMA=1"), "run", "-C", cfg, "--", tofu, "plan", "-input=false")
	if r.Code == 0 {
		t.Fatalf("the plan succeeded:\n%s", r.Stdout)
	}
	expectIn(t, "the plan", r.Stdout, "has an invalid schema", `resource faults_thing, attribute "mode": type "strnig"`)
}

const typesConfig = `terraform {
  required_providers {
    types = { source = "example.com/acme/types" }
  }
}
resource "types_thing" "a" {
  input = "a"
  num   = 123456789012345678901234567890.5
  tags  = [{ k = "x", n = 1e-30 }, { k = "y", n = 98765432109876543210 }]
}
resource "types_thing" "b" {
  input = types_thing.a.out
}
output "num" { value = types_thing.a.num }
output "b_out" { value = types_thing.b.out }
`

// An input that depends on another resource's computed output plans as (known after apply) and
// applies; a number beyond float64 and a set of objects survive the round trip exactly.
func TestStdioUnknownsAndTypes(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "tests", "providers", "stdio-types"), "example.com/acme/types", typesConfig)
	log := filepath.Join(t.TempDir(), "requests.jsonl")
	env = append(env, "TYPES_LOG="+log)
	r := boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if r.Code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.Code, r.Stdout)
	}
	expectIn(t, "the apply", r.Stdout, "+ input = (known after apply)", `b_out = "out-of-out-of-a"`)
	requests, _ := os.ReadFile(log)
	expectIn(t, "what the provider received", string(requests), `"num":123456789012345678901234567890.5`, `"n":98765432109876543210`, `"n":0.000000000000000000000000000001`)
	var st struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address string
					Values  json.RawMessage
				}
			} `json:"root_module"`
		}
	}
	showJSON(t, tofu, cfg, env, &st)
	found := false
	for _, res := range st.Values.RootModule.Resources {
		if res.Address == "types_thing.a" {
			found = true
			expectIn(t, "the state of types_thing.a", string(res.Values), `"num":123456789012345678901234567890.5`, `{"k":"y","n":98765432109876543210}`)
		}
	}
	if !found {
		t.Fatalf("no types_thing.a in the state")
	}
	// Applied again, nothing changes: the values read back equal the configuration exactly.
	r = boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", tofu, "plan", "-detailed-exitcode", "-input=false")
	if r.Code != 0 {
		t.Errorf("a second plan found changes (exit %d):\n%s", r.Code, r.Stdout)
	}
}

// An audit log and a deny rule work on a stdio provider as on any other.
func TestStdioMiddleware(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	db := filepath.Join(t.TempDir(), "kv.json")
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", strings.Replace(
		strings.Split(kvConfig, "import {")[0], "%[1]s", db, 1))
	hcl, _ := os.ReadFile(filepath.Join(cfg, "oprov.hcl"))
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), string(hcl)+`audit {
  path = "audit.jsonl"
}
rule "no-b" {
  deny    = "resource.type == 'kv_entry' && action == 'create' && planned.key == 'b'"
  message = "b is kept by hand"
}
`)
	r := boundedOprov(t, 3*time.Minute, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if r.Code == 0 {
		t.Fatalf("the apply was not denied:\n%s", r.Stdout)
	}
	expectIn(t, "the denied apply", r.Stdout, "no-b", "b is kept by hand")
	lines := readAuditLines(t, filepath.Join(cfg, "audit.jsonl"))
	rpcs := map[string]int{}
	for _, a := range lines {
		rpcs[a.RPC]++
	}
	if rpcs["PlanResourceChange"] == 0 || rpcs["ConfigureProvider"] == 0 {
		t.Errorf("the audit log lacks the provider's calls: %v", rpcs)
	}
	if _, err := os.Stat(db); err == nil {
		if e := readKV(t, db); len(e) > 0 {
			t.Errorf("a denied plan wrote entries: %+v", e)
		}
	}
}
