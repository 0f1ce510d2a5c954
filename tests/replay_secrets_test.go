package tests

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
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

// The secrets tests/providers/secrets is given or makes, by the place each one is in (the provider's
// secrets.go names the same strings). Every one must reach the provider or come from it, and
// none may be in a recording or an audit line.
var fixtureSecrets = map[string]string{
	"provider-config":       "S3CRET-provider-config",
	"sensitive-attr":        "S3CRET-sensitive-attr",
	"write-only":            "S3CRET-write-only",
	"dynamic-attr":          "S3CRET-dynamic-attr",
	"nested-block-1":        "S3CRET-nested-block-1",
	"nested-block-2":        "S3CRET-nested-block-2",
	"dynamic-typed-block-1": "S3CRET-dynamic-typed-block-1",
	"dynamic-typed-block-2": "S3CRET-dynamic-typed-block-2",
	"ephemeral-config":      "S3CRET-ephemeral-config",
	"moved-source":          "S3CRET-moved-source",
	"function-arg":          "S3CRET-function-arg",
	"generated":             "S3CRET-generated",
	"private-state":         "S3CRET-private-state",
	"moved-private":         "S3CRET-moved-private",
	"raw-private":           "S3CRET-raw-private",
	"data-source":           "S3CRET-data-source",
	"ephemeral-result":      "S3CRET-ephemeral-result",
	"ephemeral-private":     "S3CRET-ephemeral-private",
	"function-result":       "S3CRET-function-result",
}

// secretsConfig is the configuration of tests/providers/secrets that every engine runs: a
// provider token from a sensitive variable, secrets_vault with a sensitive attribute, a sensitive
// dynamic attribute holding an object and a list of blocks made by an HCL dynamic block,
// secrets_stack whose blocks hold a dynamic attribute (so they travel as a tuple), and a data
// source with a sensitive result. NOTE is replaced by the vault's note (a change of it is an
// update), VAULT by more of the vault's attributes, MORE by more of the configuration.
const secretsConfig = `terraform {
  required_providers {
    secrets = { source = "example.com/acme/secrets" }
  }
}

variable "token" {
  type      = string
  sensitive = true
  default   = "S3CRET-provider-config"
}

provider "secrets" {
  token = var.token
}

resource "secrets_vault" "a" {
  name     = "a"
  note     = "NOTE"
  password = "S3CRET-sensitive-attr"
  blob     = { user = "ops", key = "S3CRET-dynamic-attr" }
  dynamic "credential" {
    for_each = { db = "S3CRET-nested-block-1", api = "S3CRET-nested-block-2" }
    content {
      name   = credential.key
      secret = credential.value
    }
  }
  VAULT
}

resource "secrets_stack" "s" {
  name = "s"
  dynamic "layer" {
    for_each = [
      { name = "base", secret = "S3CRET-dynamic-typed-block-1", extra = "plain" },
      { name = "top", secret = "S3CRET-dynamic-typed-block-2", extra = { depth = 2 } },
    ]
    content {
      name   = layer.value.name
      secret = layer.value.secret
      extra  = layer.value.extra
    }
  }
}

data "secrets_lookup" "l" {
  name = "l"
}

output "looked_up" {
  value     = data.secrets_lookup.l.value
  sensitive = true
}
MORE`

// secretsVaultTofu gives the vault write-only attributes, one from an ephemeral resource's result
// (tofu 1.12; Terraform 1.5.7 has neither).
const secretsVaultTofu = `wo_password = "S3CRET-write-only"
  wo_token    = ephemeral.secrets_token.t.value`

// secretsTofu is what only tofu runs: an ephemeral resource, a resource to move, and a provider
// function given a sensitive variable.
const secretsTofu = `
ephemeral "secrets_token" "t" {
  seed = "S3CRET-ephemeral-config"
}

variable "fn_arg" {
  type      = string
  sensitive = true
  default   = "S3CRET-function-arg"
}

output "revealed" {
  value     = provider::secrets::reveal(var.fn_arg)
  sensitive = true
}
`

// secretsOld is the resource the second apply moves; secretsMoved moves it to another type.
const secretsOld = `
resource "secrets_old" "m" {
  name = "m"
  key  = "S3CRET-moved-source"
}
`

const secretsMoved = `
moved {
  from = secrets_old.m
  to   = secrets_vault.m
}

resource "secrets_vault" "m" {
  name     = "m"
  password = "S3CRET-moved-source"
}
`

// secretsCase is one engine and configuration the fixture runs with.
type secretsCase struct {
	name, tool string
	// tofuOnly adds write-only attributes, the ephemeral resource, the function and the
	// cross-type move: what tofu 1.12 has and Terraform 1.5.7 lacks. Replay must then refuse.
	tofuOnly bool
}

// places is where the case puts a secret: the provider must log each as received.
func (c secretsCase) places() []string {
	out := []string{"provider-config", "sensitive-attr", "dynamic-attr", "nested-block", "dynamic-typed-block",
		"generated", "private-state", "raw-private"}
	if c.tofuOnly {
		out = append(out, "write-only", "ephemeral-config", "ephemeral-result", "ephemeral-private",
			"moved-source", "moved-private", "function-arg")
	}
	return out
}

func (c secretsCase) config(second bool) string {
	note, vault, more := "one", "", ""
	if second {
		note = "two"
	}
	if c.tofuOnly {
		vault, more = secretsVaultTofu, secretsTofu+secretsOld
		if second {
			more = secretsTofu + secretsMoved
		}
	}
	return strings.NewReplacer("NOTE", note, "VAULT", vault, "MORE", more).Replace(secretsConfig)
}

var (
	secretsOnce  sync.Once
	secretsCache string // one cache for every case, so the provider is built once
)

// A provider that puts a secret in every place a provider can (a sensitive provider attribute
// from a sensitive variable, sensitive, write-only, computed and dynamic attributes, a list of
// blocks made by an HCL dynamic block, blocks holding a dynamic attribute, the framework's and
// raw private state, a data source's result, an ephemeral resource's configuration, result and
// private state, a cross-type move's source state and private state, a function's argument and
// result) leaves none of them, raw, in base64 (at any alignment) or in hex, in any recording of
// an apply, a plan, a plan keeping the provider configuration, a refresh and a second apply
// (an update, and with tofu the move), nor in the audit with values on. The provider logs each
// secret it received, so every secret is known to have crossed the proxy. A replayed plan shows
// no changes where the configuration has no ephemeral resource or function, and is refused,
// naming why, where it has.
func TestRecordingsKeepNoSecretOfAnyPlace(t *testing.T) {
	for _, c := range []secretsCase{
		{name: "tofu", tool: "tofu", tofuOnly: true},
		{name: "tofu-replayable", tool: "tofu"},
		{name: "terraform", tool: "terraform"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := peers.Require(t, c.tool)
			secretsOnce.Do(func() { secretsCache, _ = os.MkdirTemp("", "oprov-secrets-cache-") })
			cfg := t.TempDir()
			recs := t.TempDir()
			copyDir(t, filepath.Join(repoRoot, "tests", "providers", "secrets"), filepath.Join(cfg, "secrets"))
			writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/secrets\" {\n  source = \"./secrets\"\n}\n"+
				"audit {\n  path   = \"audit.jsonl\"\n  values = true\n}\n")
			writeFile(t, filepath.Join(cfg, "main.tf"), c.config(false))
			seen := filepath.Join(t.TempDir(), "seen.log")
			env := []string{"OPROV_CACHE_DIR=" + secretsCache, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
				"HOME=" + t.TempDir(), "SECRETS_LOG=" + seen}
			record := func(name string, flags []string, args ...string) string {
				rec := filepath.Join(recs, name+".jsonl")
				run := append([]string{"run", "-C", cfg, "--record", rec}, flags...)
				mustOprov(t, env, append(append(run, "--", bin), args...)...)
				return rec
			}
			apply := record("apply", nil, "apply", "-auto-approve", "-input=false")
			plan := record("plan", nil, "plan", "-input=false")
			record("plan-provider-config", []string{"--record-provider-config"}, "plan", "-input=false")
			record("refresh", nil, "refresh", "-input=false")

			// Replay: a plan from the plan's recording.
			r := oprov(t, offlineEnv(env), "run", "-C", cfg, "--replay", plan, "--", bin, "plan", "-detailed-exitcode", "-input=false", "-no-color")
			all := r.Stdout + r.Stderr
			if c.tofuOnly {
				// Neither an ephemeral resource's result nor a function's result is recorded
				// (the function's was not asked for): replay refuses both, saying why.
				flat := strings.Join(strings.Fields(all), " ") // as tofu wraps it
				if r.Code != 1 || !strings.Contains(flat, "an ephemeral resource's result is never recorded") ||
					!strings.Contains(flat, "a provider function's result is not recorded unless the recording was made with oprov run --record-function-results") {
					t.Errorf("a replayed plan of a configuration with an ephemeral resource and a function: exit %d, want both refused\n%s", r.Code, all)
				}
				t.Logf("replayed plan (ephemeral resource and function): exit %d\n%s", r.Code, all)
			} else if r.Code != 0 && r.Code != 2 || strings.Contains(all, "Plan:") || strings.Contains(all, "Error") ||
				r.Code == 2 && strings.Join(changedOutputs(all), " ") != "looked_up" {
				// No resource changes. The data source's sensitive result is not recorded, and
				// nothing in the request holds it: replay answers the marker, so the output
				// that shows it changes (exit 2), and only that one.
				t.Errorf("replayed plan: exit %d, want no resource changes and no output changed but looked_up\n%s", r.Code, all)
			}

			writeFile(t, filepath.Join(cfg, "main.tf"), c.config(true))
			apply2 := record("apply-2", nil, "apply", "-auto-approve", "-input=false")

			// Every secret crossed the wire: the provider received each.
			got := map[string]bool{}
			data, _ := os.ReadFile(seen)
			for _, p := range strings.Fields(string(data)) {
				got[p] = true
			}
			for _, p := range c.places() {
				if !got[p] {
					t.Errorf("the provider never received its secret at %s (it received: %s)", p, strings.Join(sortedKeys(got), " "))
				}
			}
			// And the answers carried what the provider made: tofu kept it in its outputs.
			var outputs map[string]struct{ Value any }
			tofuJSON(t, bin, cfg, env, &outputs, "output", "-json")
			if v := fmt.Sprint(outputs["looked_up"].Value); v != fixtureSecrets["data-source"] {
				t.Errorf("output looked_up = %q, want the data source's secret", v)
			}
			if c.tofuOnly {
				if v := fmt.Sprint(outputs["revealed"].Value); v != fixtureSecrets["function-arg"]+"+"+fixtureSecrets["function-result"] {
					t.Errorf("output revealed = %q, want the function's argument and its own secret", v)
				}
			}

			// The recordings hold the calls, decoded: not everything redacted whole.
			must := map[string][]string{
				apply: {`"call":"ConfigureProvider"`, `"call":"ApplyResourceChange"`, `"type":"secrets_stack"`, `"call":"ReadDataSource"`,
					`"api"`, `"base"`, `"plain"`},
				apply2: {`"call":"ApplyResourceChange"`, `"two"`},
			}
			if c.tofuOnly {
				must[apply] = append(must[apply], `"call":"OpenEphemeralResource"`, `"call":"CloseEphemeralResource"`, `"call":"CallFunction"`)
				must[apply2] = append(must[apply2], `"call":"MoveResourceState"`)
			}
			for rec, wants := range must {
				data, err := os.ReadFile(rec)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range wants {
					if !bytes.Contains(data, []byte(w)) {
						t.Errorf("%s lacks %s", filepath.Base(rec), w)
					}
				}
			}

			// No secret anywhere.
			files, _ := filepath.Glob(filepath.Join(recs, "*.jsonl"))
			files = append(files, filepath.Join(cfg, "audit.jsonl"))
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if len(data) == 0 {
					t.Errorf("%s is empty", filepath.Base(f))
				}
				for _, leak := range findSecrets(data) {
					t.Errorf("%s: %s", filepath.Base(f), leak)
				}
			}
		})
	}
	if secretsCache != "" {
		os.RemoveAll(secretsCache)
	}
}

// changedOutputs lists the outputs a plan's "Changes to Outputs:" section names.
func changedOutputs(plan string) []string {
	_, section, ok := strings.Cut(plan, "Changes to Outputs:")
	if !ok {
		return nil
	}
	var out []string
	for _, line := range strings.Split(section, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && len(f[0]) == 1 && strings.Contains("~+-", f[0]) && f[2] == "=" {
			out = append(out, f[1])
		} else if strings.TrimSpace(line) != "" && len(out) > 0 {
			break
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// secretForm is one way a secret can be written inside a longer text.
type secretForm struct {
	needle string
	fold   bool // compared ignoring case
	what   string
}

// secretForms gives the ways s can be written inside a longer text: itself and its hex (either
// case), and its standard and URL base64 at each of the three alignments it can start at, cut
// to the characters s alone decides.
func secretForms(s, what string) []secretForm {
	out := []secretForm{{strings.ToLower(s), true, what + ", as itself"},
		{hex.EncodeToString([]byte(s)), true, what + ", in hex"}}
	for k := 0; k < 3; k++ {
		for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "URL base64": base64.URLEncoding} {
			e := enc.EncodeToString(append(make([]byte, k), s...))
			start := 0
			if k > 0 {
				start = 4 // the first group mixes the k bytes before s
			}
			// The last group may be padded, or mix what follows s. Shorter than 8 characters,
			// a piece of base64 is found by chance in any long base64 text.
			if e = e[start : len(e)-4]; len(e) >= 8 {
				out = append(out, secretForm{e, false, fmt.Sprintf("%s, in %s at offset %d", what, name, k)})
			}
		}
	}
	return out
}

// findSecrets lists every secret of fixtureSecrets, and the marker every one starts with, found
// in data in any form secretForms gives: the place the secret came from, the form, the line, and
// for a JSON line its call (or audit rpc) and the JSON paths whose text holds the marker.
func findSecrets(data []byte) []string {
	var forms []secretForm
	for place, s := range fixtureSecrets {
		forms = append(forms, secretForms(s, fmt.Sprintf("the %s secret %s", place, s))...)
	}
	forms = append(forms, secretForms("S3CRET-", "the marker S3CRET- that starts every secret")...)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		lower := strings.ToLower(text)
		var hits []string
		for _, f := range forms {
			if f.fold && strings.Contains(lower, f.needle) || !f.fold && strings.Contains(text, f.needle) {
				hits = append(hits, f.what)
			}
		}
		if len(hits) == 0 {
			continue
		}
		sort.Strings(hits)
		var rec struct{ Call, Type, RPC, Name string }
		_ = json.Unmarshal([]byte(text), &rec)
		where := fmt.Sprintf("line %d (call %q type %q; audit rpc %q name %q)", line, rec.Call, rec.Type, rec.RPC, rec.Name)
		var v any
		if json.Unmarshal([]byte(text), &v) == nil {
			if paths := jsonPathsHolding(v, "", "s3cret"); len(paths) > 0 {
				where += " at " + strings.Join(paths, ", ")
			}
		}
		out = append(out, fmt.Sprintf("%s holds %s", where, strings.Join(hits, "; ")))
	}
	if sc.Err() != nil {
		out = append(out, "reading it: "+sc.Err().Error())
	}
	return out
}

// jsonPathsHolding lists the paths of v's strings (and keys) that hold needle, ignoring case.
func jsonPathsHolding(v any, at, needle string) []string {
	var out []string
	switch v := v.(type) {
	case string:
		if strings.Contains(strings.ToLower(v), needle) {
			out = append(out, at)
		}
	case []any:
		for i, e := range v {
			out = append(out, jsonPathsHolding(e, fmt.Sprintf("%s[%d]", at, i), needle)...)
		}
	case map[string]any:
		for k, e := range v {
			if strings.Contains(strings.ToLower(k), needle) {
				out = append(out, at+"."+k+" (the key)")
			}
			out = append(out, jsonPathsHolding(e, at+"."+k, needle)...)
		}
	}
	sort.Strings(out)
	return out
}

// The grep of TestRecordingsKeepNoSecretOfAnyPlace finds a secret however a recording could
// write it: as itself, in another case, in hex, and in base64 inside longer bytes at every
// alignment; and names the call and the JSON path.
func TestSecretGrepFindsEveryForm(t *testing.T) {
	s := fixtureSecrets["moved-private"]
	for k := 0; k < 3; k++ {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			b := append(append([]byte("\x92\xc4"[:k]), s...), "\x00tail"...)
			line := `{"call":"MoveResourceState","request":{"source_private":"` + enc.EncodeToString(b) + `"}}`
			if got := findSecrets([]byte(line)); len(got) != 1 || !strings.Contains(got[0], "moved-private") ||
				!strings.Contains(got[0], `call "MoveResourceState"`) {
				t.Errorf("base64 at offset %d: %q", k, got)
			}
		}
	}
	for _, text := range []string{s, strings.ToUpper(s), hex.EncodeToString([]byte("x" + s)), strings.ToUpper(hex.EncodeToString([]byte(s)))} {
		line := `{"call":"ReadResource","response":{"private":{"k":"` + text + `"}}}`
		if got := findSecrets([]byte("{}\n" + line)); len(got) != 1 || !strings.Contains(got[0], "line 2") || !strings.Contains(got[0], "moved-private") {
			t.Errorf("%s: %q", text, got)
		}
	}
	if got := findSecrets([]byte(`{"k":"S3CRET-something-else"}`)); len(got) != 1 || !strings.Contains(got[0], "marker") || !strings.Contains(got[0], ".k") {
		t.Errorf("the marker alone: %q", got)
	}
	if got := findSecrets([]byte(`{"call":"ReadResource","response":{"private":"(redacted)"}}`)); len(got) != 0 {
		t.Errorf("a clean line: %q", got)
	}
}
