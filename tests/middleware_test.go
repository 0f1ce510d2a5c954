package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

var (
	recorderOnce  sync.Once
	recorderCache string // one cache for every middleware test, so the provider is built once
)

const recorderSecret = "hunter2-never-in-the-audit"

// recorderConfig uses every kind of thing tests/providers/recorder has: a resource with a
// sensitive attribute, a data source, and (withFunction: not in terraform 1.5) a function.
func recorderConfig(withFunction bool) string {
	tf := `terraform {
  required_providers {
    recorder = { source = "example.com/acme/recorder" }
  }
}
resource "recorder_thing" "a" {
  name   = "one"
  tags   = { owner = "platform" }
  secret = "` + recorderSecret + `"
}
data "recorder_info" "i" {
  input = "quiet"
}
output "info" { value = data.recorder_info.i.output }
`
	if withFunction {
		tf += "output \"shouted\" { value = provider::recorder::shout(\"hi\") }\n"
	}
	return tf
}

// middlewareDir lays out a configuration that keeps the recorder provider as source, with extra
// oprov.hcl content, and gives it with the environment to run oprov in.
func middlewareDir(t *testing.T, tool, extraHCL string) (string, []string) {
	t.Helper()
	recorderOnce.Do(func() { recorderCache, _ = os.MkdirTemp("", "oprov-recorder-cache-") })
	cfg := t.TempDir()
	copyDir(t, filepath.Join(repoRoot, "tests", "providers", "recorder"), filepath.Join(cfg, "recorder"))
	writeFile(t, filepath.Join(cfg, "main.tf"), recorderConfig(filepath.Base(tool) == "tofu"))
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/recorder\" {\n  source = \"./recorder\"\n}\n"+extraHCL)
	env := []string{"OPROV_CACHE_DIR=" + recorderCache, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + t.TempDir(),
		"RECORDER_LOG=" + filepath.Join(cfg, "calls.log")}
	return cfg, env
}

// servedCalls counts, by RPC, the calls the recorder provider says it served.
func servedCalls(t *testing.T, cfg string) map[string]int {
	t.Helper()
	out := map[string]int{}
	data, _ := os.ReadFile(filepath.Join(cfg, "calls.log"))
	for _, line := range strings.Fields(string(data)) {
		out[line[strings.LastIndexByte(line, '/')+1:]]++
	}
	return out
}

type auditLine struct {
	RPC, Kind, Name, Action, Caller, Sandbox string
	Diagnostics                              []struct{ Severity, Summary string }
	Policy                                   []struct{ Rule, Effect string }
}

func readAuditLines(t *testing.T, path string) []auditLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditLine
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var a auditLine
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, a)
	}
	return out
}

func sortedCounts(m map[string]int) string {
	var keys []string
	for k, n := range m {
		keys = append(keys, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

// Every call the provider served during apply and destroy has exactly one audit line, resource,
// data source and function work through the proxy, and the sensitive value never reaches the
// audit file even with values recorded.
func TestMiddlewareAudit(t *testing.T) {
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			cfg, env := middlewareDir(t, bin, "audit {\n  path   = \"audit.jsonl\"\n  values = true\n}\n")
			mustOprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			var outputs map[string]struct{ Value string }
			tofuJSON(t, bin, cfg, env, &outputs, "output", "-json")
			if outputs["info"].Value != "QUIET" || (tool == "tofu" && outputs["shouted"].Value != "HI!") {
				t.Errorf("outputs through the proxy: %+v", outputs)
			}
			mustOprov(t, env, "run", "-C", cfg, "--", bin, "destroy", "-auto-approve", "-input=false")
			audited := map[string]int{}
			actions := map[string]bool{}
			launches := 0
			for _, a := range readAuditLines(t, filepath.Join(cfg, "audit.jsonl")) {
				if a.RPC == "Launch" { // oprov's record of a launch, not a call
					launches++
					if a.Sandbox != "no sandbox" {
						t.Errorf("the launch record says the recorder ran under %q; it has no sandbox block", a.Sandbox)
					}
					continue
				}
				audited[a.RPC]++
				actions[a.RPC+":"+a.Action] = true
			}
			if launches != 2 {
				t.Errorf("the audit has %d launch records, want 2 (apply and destroy)", launches)
			}
			if served := servedCalls(t, cfg); sortedCounts(served) != sortedCounts(audited) || len(served) == 0 {
				t.Errorf("the provider served %s\nbut the audit has %s", sortedCounts(served), sortedCounts(audited))
			}
			if tool == "tofu" && audited["GetResourceIdentitySchemas"] == 0 {
				t.Errorf("tofu %s no longer calls GetResourceIdentitySchemas, which shows a call outside oprov's stubs passing through: find another", tool)
			}
			for _, want := range []string{"ApplyResourceChange:create", "ApplyResourceChange:delete", "PlanResourceChange:create", "ReadDataSource:read"} {
				if !actions[want] {
					t.Errorf("no audit line for %s; have %v", want, actions)
				}
			}
			data, _ := os.ReadFile(filepath.Join(cfg, "audit.jsonl"))
			if strings.Contains(string(data), recorderSecret) || !strings.Contains(string(data), "(sensitive)") {
				t.Errorf("the sensitive value reached the audit file, or nothing was redacted")
			}
		})
	}
}

const denyCreate = `rule "no-new-things" {
  deny    = "resource.type == 'recorder_thing' && action == 'create'"
  message = "things are created by the platform team"
}
`

// A deny rule fails the plan with its name and message, and the provider never applies.
func TestMiddlewareDeny(t *testing.T) {
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			cfg, env := middlewareDir(t, bin, denyCreate)
			r := oprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			out := r.Stdout + r.Stderr
			if r.Code == 0 || !strings.Contains(out, "no-new-things") || !strings.Contains(out, "things are created by the platform team") {
				t.Fatalf("apply was not denied with the rule's name and message (exit %d):\n%s", r.Code, out)
			}
			if served := servedCalls(t, cfg); served["ApplyResourceChange"] != 0 || served["PlanResourceChange"] == 0 {
				t.Errorf("the provider served %s: it must plan, and never apply", sortedCounts(served))
			}
		})
	}
}

// A warn rule shows its warning, and the apply goes ahead.
func TestMiddlewareWarn(t *testing.T) {
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			cfg, env := middlewareDir(t, bin, strings.NewReplacer("deny", "warn", "no-new-things", "new-thing").Replace(denyCreate))
			r := mustOprov(t, env, "run", "-C", cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			if out := r.Stdout + r.Stderr; !strings.Contains(out, "new-thing") || !strings.Contains(out, "things are created by the platform team") {
				t.Errorf("no warning shown:\n%s", out)
			}
			if served := servedCalls(t, cfg); served["ApplyResourceChange"] == 0 {
				t.Errorf("a warn rule stopped the apply: %s", sortedCounts(served))
			}
		})
	}
}

// A malformed rule is an error at oprov.hcl's line, and nothing is launched.
func TestMiddlewareBadRule(t *testing.T) {
	bin := peers.Require(t, "tofu")
	cfg, env := middlewareDir(t, bin, "rule \"broken\" {\n  deny = \"action ==\"\n}\n")
	r := oprov(t, env, "run", "-v", "-C", cfg, "--", bin, "apply", "-auto-approve")
	if r.Code == 0 || !strings.Contains(r.Stderr, "oprov.hcl:5") || !strings.Contains(r.Stderr, `rule "broken"`) {
		t.Errorf("want an error at oprov.hcl:5 naming the rule (exit %d):\n%s", r.Code, r.Stderr)
	}
	if strings.Contains(r.Stderr, "launched") || len(servedCalls(t, cfg)) > 0 {
		t.Errorf("a provider was launched despite the bad rule:\n%s", r.Stderr)
	}
}
