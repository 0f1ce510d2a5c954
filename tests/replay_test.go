package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// replayHello is the hello configuration with for_each over a resource, a data source and (for
// tofu) a provider function.
const replayHello = `terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = "~> 1.0"
    }
  }
}

provider "hello" {
  greeting = "Hello"
}

resource "hello_greeting" "each" {
  for_each = { a = "ada", g = "grace", l = "linus" }
  name     = each.value
}

data "hello_greeting" "tofu" {
  name = "tofu"
}

output "messages" {
  value = [for g in hello_greeting.each : g.message]
}

output "data_message" {
  value = data.hello_greeting.tofu.message
}
`

// replayModuleCall calls replayModule (in ./m) from a hello configuration.
const replayModuleCall = `
module "m" {
  source = "./m"
}

output "module_messages" {
  value = module.m.messages
}
`

// replayModule is a child module with a counted resource of the root's hello provider.
const replayModule = `terraform {
  required_providers {
    hello = {
      source = "example.com/acme/hello"
    }
  }
}

resource "hello_greeting" "c" {
  count = 2
  name  = "mod-${count.index}"
}

output "messages" {
  value = hello_greeting.c[*].message
}
`

// offlineEnv is the environment of a replay: no proxy reaches anything, and the cache is gone.
func offlineEnv(env []string) []string {
	return append(env, "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY=")
}

// replayCycle records an apply of cfg's configuration (main.tf holds tf), then, with the cache
// removed (and whatever gone stops), replays a plan that must show no changes and an apply that
// must succeed with outputs holding want; then changes old to new in main.tf, and the replayed
// plan must fail naming resource and the new value. It gives the recording.
func replayCycle(t *testing.T, bin, cfg, tf string, env []string, cache string, gone func(), want []string, old, new, resource string) string {
	t.Helper()
	return replayCycleImporting(t, bin, cfg, tf, env, cache, gone, want, old, new, resource, nil)
}

// replayImport is a resource replayCycleImporting takes out of the state and imports again by its
// id: recorded after the recorded apply, replayed before the replayed plan.
type replayImport struct{ addr, id string }

// replayCycleImporting is replayCycle that also records an import of imp (into its own recording)
// and replays it, and replays a refresh after the second apply: the outputs are read after it.
func replayCycleImporting(t *testing.T, bin, cfg, tf string, env []string, cache string, gone func(), want []string, old, new, resource string, imp *replayImport) string {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	recImport := filepath.Join(filepath.Dir(rec), "import.jsonl")
	writeFile(t, filepath.Join(cfg, "main.tf"), tf)
	start := time.Now()
	mustOprov(t, env, "run", "-C", cfg, "--record", rec, "--record-function-results", "--", bin, "apply", "-auto-approve", "-input=false")
	t.Logf("recorded apply: %s", time.Since(start).Round(time.Millisecond))
	if imp != nil {
		// state rm needs the providers' schemas only: the recording has them.
		mustOprov(t, env, "run", "-C", cfg, "--replay", rec, "--", bin, "state", "rm", imp.addr)
		mustOprov(t, env, "run", "-C", cfg, "--record", recImport, "--record-function-results", "--", bin, "import", "-input=false", imp.addr, imp.id)
		if data, err := os.ReadFile(recImport); err != nil || !strings.Contains(string(data), `"call":"ImportResourceState"`) {
			t.Fatalf("the import's recording lacks ImportResourceState (%v)", err)
		}
	}
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
	if gone != nil {
		gone()
	}
	off := offlineEnv(env)
	if imp != nil {
		mustOprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "state", "rm", imp.addr)
		r := oprov(t, off, "run", "-C", cfg, "--replay", recImport, "--", bin, "import", "-input=false", "-no-color", imp.addr, imp.id)
		if r.Code != 0 {
			t.Fatalf("replayed import of %s: exit %d\n%s%s", imp.addr, r.Code, r.Stdout, r.Stderr)
		}
	}
	r := oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "plan", "-detailed-exitcode", "-input=false", "-no-color")
	if r.Code != 0 {
		t.Fatalf("replayed plan: exit %d, want 0 (no changes)\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "apply", "-auto-approve", "-input=false", "-no-color")
	if r.Code != 0 {
		t.Fatalf("second replayed apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if imp != nil {
		r = oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "refresh", "-input=false", "-no-color")
		if r.Code != 0 {
			t.Fatalf("replayed refresh: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	}
	out := mustOprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "output", "-json")
	for _, w := range want {
		if !strings.Contains(out.Stdout, w) {
			t.Errorf("outputs after the replayed apply lack %s: %s", w, out.Stdout)
		}
	}
	if _, err := os.Stat(cache); err == nil {
		t.Errorf("the replay made the cache again: it installed something")
	}
	if !strings.Contains(tf, old) {
		t.Fatalf("the configuration has no %s to change", old)
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(tf, old, new, 1))
	r = oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "plan", "-input=false", "-no-color")
	newValue := new[strings.IndexByte(new, '"'):]
	all := r.Stderr + r.Stdout
	if r.Code == 0 || !strings.Contains(all, "oprov replay: the recording holds no") ||
		!strings.Contains(all, resource) || !strings.Contains(all, `now `+newValue) {
		t.Errorf("a replayed plan with %s changed to %s: exit %d\n%s%s", old, new, r.Code, r.Stdout, r.Stderr)
	}
	// The error's own hint, --replay-ignore TYPE.ATTRIBUTE, leaves the attribute out of the
	// comparison, not out of the plan: the plan shows the change, never "No changes".
	if hint := regexp.MustCompile(`--replay-ignore\s+([A-Za-z0-9_]+\.[A-Za-z0-9_]+)`).FindStringSubmatch(all); hint == nil {
		t.Errorf("the replayed plan's error gives no --replay-ignore hint:\n%s", all)
	} else {
		r = oprov(t, off, "run", "-C", cfg, "--replay", rec, "--replay-ignore", hint[1], "--", bin, "plan", "-detailed-exitcode", "-input=false", "-no-color")
		if r.Code != 2 || !strings.Contains(r.Stdout, "-> "+newValue) {
			t.Errorf("a replayed plan with %s changed to %s and --replay-ignore %s: exit %d, want 2 and the change shown\n%s%s", old, new, hint[1], r.Code, r.Stdout, r.Stderr)
		}
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), tf)
	// The documented workflow commits no state (it holds the secrets the recording redacts):
	// CI replays the apply into no state, then the plan shows no changes.
	for _, f := range []string{"terraform.tfstate", "terraform.tfstate.backup"} {
		if err := os.Remove(filepath.Join(cfg, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if r = oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "apply", "-auto-approve", "-input=false", "-no-color"); r.Code != 0 {
		t.Fatalf("a replayed apply into no state: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r = oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "plan", "-detailed-exitcode", "-input=false", "-no-color"); r.Code != 0 {
		t.Errorf("the replayed plan after a replayed apply into no state: exit %d, want 0 (no changes)\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	return rec
}

// A recorded apply of two OCI providers (hello speaks protocol 6, counter protocol 5), with
// for_each in the root module and count in a child module, replays with no registry, no cached
// executable and no provider process: an import recorded apart replays, the plan shows no
// changes, a second apply and a refresh succeed; a changed attribute fails the plan naming the
// resource and the attribute. provider check --json then drives the recording itself.
func TestReplayOCIProvider(t *testing.T) {
	for _, tool := range []struct {
		name, cfg string
	}{{"tofu", replayHello + helloFunctionOutput}, {"terraform", replayHello}} {
		t.Run(tool.name, func(t *testing.T) {
			bin := peers.Require(t, tool.name)
			tf := withCounter(tool.cfg) + replayModuleCall
			f := newLoaderFixture(t, tf)
			writeFile(t, filepath.Join(f.cfg, "m", "main.tf"), replayModule)
			mustTofu(t, bin, f.cfg, f.env, "get")
			mustOprov(t, f.env, "push", counterRelease(t), f.reg.Host+"/providers/acme/counter", "--sign", "--key", filepath.Join(f.keys, "cosign.key"))
			env := append(f.env, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
			want := []string{"Hello, grace!", "Hello, tofu!", `"3"`, "Hello, mod-0!", "Hello, mod-1!"}
			if tool.name == "tofu" {
				want = append(want, "Hello, function!")
			}
			imp := &replayImport{addr: "module.m.hello_greeting.c[1]", id: "greeting-mod-1"}
			rec := replayCycleImporting(t, bin, f.cfg, tf, env, f.cache, f.reg.Stop, want, `g = "grace"`, `g = "hopper"`, `hello_greeting.each["g"]`, imp)
			data, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"oprov_recording":2`, `"call":"ApplyResourceChange"`, `"call":"ReadDataSource"`, `"grace"`} {
				if !strings.Contains(string(data), want) {
					t.Errorf("the recording lacks %s", want)
				}
			}
			if tool.name == "tofu" && !strings.Contains(string(data), `"call":"CallFunction"`) {
				t.Errorf("the recording lacks the function call")
			}
			if !strings.Contains(string(data), `"protocol":5`) {
				t.Errorf("the recording lacks the protocol 5 provider")
			}
			answers := driveJSON(t, offlineEnv(env), "--recording "+rec+" --address example.com/acme/hello", `{"call":"configure","config":{"greeting":"Hello"}}`, `{"call":"data","type":"hello_greeting","config":{"name":"tofu"}}`)
			expectAnswers(t, answers, "", `"Hello, tofu!"`)
			off := offlineEnv(env)
			// A changed provider configuration is a difference, though the recording redacts it.
			writeFile(t, filepath.Join(f.cfg, "main.tf"), strings.Replace(tf, `greeting = "Hello"`, `greeting = "Howdy"`, 1))
			r := oprov(t, off, "run", "-C", f.cfg, "--replay", rec, "--", bin, "plan", "-input=false", "-no-color")
			if all := r.Stdout + r.Stderr; r.Code == 0 || !strings.Contains(all, "config.greeting: a redacted value other than the recorded one") {
				t.Errorf("a replayed plan with the provider's greeting changed: exit %d\n%s", r.Code, all)
			}
			// A recorded version the configuration's required_providers rule out is refused,
			// naming both, before tofu runs.
			writeFile(t, filepath.Join(f.cfg, "main.tf"), strings.Replace(tf, `version = "~> 1.0"`, `version = "~> 2.0"`, 1))
			r = oprov(t, off, "run", "-C", f.cfg, "--replay", rec, "--", bin, "plan", "-input=false", "-no-color")
			if r.Code == 0 || !strings.Contains(r.Stderr, `example.com/acme/hello version "1.0.0"`) || !strings.Contains(r.Stderr, `"~> 2.0"`) {
				t.Errorf("a replay of hello 1.0.0 with version ~> 2.0 required: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			writeFile(t, filepath.Join(f.cfg, "main.tf"), tf)
		})
	}
}

// kvReplay is the stdio kv provider's configuration with for_each, a data source and (for tofu)
// a function.
const kvReplay = `terraform {
  required_providers {
    kv = { source = "example.com/acme/kv" }
  }
}
provider "kv" { path = "%[1]s" }
resource "kv_entry" "e" {
  for_each = { a = "one", b = "two" }
  key      = each.key
  value    = each.value
}
data "kv_keys" "all" {
  depends_on = [kv_entry.e]
}
output "keys" { value = join(",", data.kv_keys.all.keys) }
%[2]s`

// A stdio provider (the Python example) replays with its database gone: no provider runs.
func TestReplayStdioProvider(t *testing.T) {
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			db := filepath.Join(t.TempDir(), "kv.json")
			writeFile(t, db, `{}`)
			fn, want := "", []string{`"a,b"`}
			if tool == "tofu" {
				fn, want = kvFunctionOutput, append(want, `"kv:zz"`)
			}
			tf := fmt.Sprintf(kvReplay, db, fn)
			cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", tf)
			cache := env[0][len("OPROV_CACHE_DIR="):]
			replayCycle(t, bin, cfg, tf, env, cache, func() { os.Remove(db) }, want, `b = "two"`, `b = "three"`, `kv_entry.e["b"]`)
			if _, err := os.Stat(db); err == nil {
				t.Errorf("the replay reached the provider: its database is back")
			}
		})
	}
}

// pyReplay is the Python example's configuration with for_each and a data source (its SDK has
// no provider functions).
const pyReplay = `terraform {
  required_providers {
    pyhello = { source = "example.com/acme/pyhello" }
  }
}
provider "pyhello" {}
resource "pyhello_greeting" "each" {
  for_each = { a = "ada", g = "grace" }
  name     = each.value
}
data "pyhello_greeting" "tofu" {
  name = "tofu"
}
output "messages" { value = [for g in pyhello_greeting.each : g.message] }
output "data_message" { value = data.pyhello_greeting.tofu.message }
`

// A Python provider kept as source replays with its venv gone.
func TestReplayPythonProvider(t *testing.T) {
	bin := peers.Require(t, "tofu")
	cfg, _, env := pySourceConfig(t)
	cache := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "OPROV_CACHE_DIR="); ok {
			cache = v
		}
	}
	replayCycle(t, bin, cfg, pyReplay, env, cache, nil, []string{"Hello, grace!", "Hello, tofu!"}, `g = "grace"`, `g = "hopper"`, `pyhello_greeting.each["g"]`)
}

const recorderToken = "tok-never-in-the-recording"

// A provider configured with a sensitive token, and a resource with a sensitive attribute: neither
// reaches the recording, and the replay still works.
func TestReplayKeepsSecretsOut(t *testing.T) {
	bin := peers.Require(t, "tofu")
	cfg, env := middlewareDir(t, bin, "")
	cache := t.TempDir()
	state := t.TempDir()
	env = append(env, "OPROV_CACHE_DIR="+cache, "OPROV_STATE_DIR="+state, "OPROV_RECORDING_KEY=")
	tf := strings.Replace(recorderConfig(true), "resource \"recorder_thing\"", "provider \"recorder\" {\n  token = \""+recorderToken+"\"\n}\nresource \"recorder_thing\"", 1)
	rec := replayCycle(t, bin, cfg, tf, env, cache, nil, []string{"QUIET", "HI!"}, `name   = "one"`, `name   = "two"`, `recorder_thing.a`)
	off := offlineEnv(env)
	// A changed secret is a difference: the provider's token, a sensitive attribute.
	for _, c := range []struct{ old, new, want string }{
		{recorderToken, "tok-changed", "config.token: a redacted value other than the recorded one"},
		{recorderSecret, "hunter3", "config.secret: a redacted value other than the recorded one"},
	} {
		writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(tf, c.old, c.new, 1))
		r := oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", bin, "plan", "-input=false", "-no-color")
		if all := r.Stdout + r.Stderr; r.Code == 0 || !strings.Contains(all, c.want) {
			t.Errorf("a replayed plan with %s changed: exit %d, want %q\n%s", c.old, r.Code, c.want, all)
		}
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), tf)
	// CI holds the key as a secret and sets OPROV_RECORDING_KEY to it; another key is an error
	// naming the variable.
	key, err := os.ReadFile(filepath.Join(state, "recording.key"))
	if err != nil {
		t.Fatal(err)
	}
	ci := append(append([]string{}, off...), "OPROV_STATE_DIR="+t.TempDir(), "OPROV_RECORDING_KEY="+strings.TrimSpace(string(key)))
	if r := oprov(t, ci, "run", "-C", cfg, "--replay", rec, "--", bin, "plan", "-detailed-exitcode", "-input=false", "-no-color"); r.Code != 0 {
		t.Errorf("a replayed plan with the key in OPROV_RECORDING_KEY: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	ci[len(ci)-1] = "OPROV_RECORDING_KEY=" + strings.Repeat("5a", 32)
	if r := oprov(t, ci, "run", "-C", cfg, "--replay", rec, "--", bin, "plan", "-input=false", "-no-color"); r.Code == 0 || !strings.Contains(r.Stderr, "set OPROV_RECORDING_KEY to the key it was made with") {
		t.Errorf("a replay with another key: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{recorderToken, recorderSecret} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the recording holds the secret %q", secret)
		}
	}
	if !strings.Contains(string(data), `"(redacted by oprov)"`) {
		t.Errorf("the recording redacts nothing")
	}
}
