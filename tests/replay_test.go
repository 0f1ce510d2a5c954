package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/internal/peers"
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

// offlineEnv is the environment of a replay: no proxy reaches anything, and the cache is gone.
func offlineEnv(env []string) []string {
	return append(env, "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY=")
}

// A recorded apply of an OCI provider replays with no registry, no cached executable and no
// provider process: the plan shows no changes and a second apply succeeds; a changed attribute
// fails the plan naming the resource and the attribute.
func TestReplayOCIProvider(t *testing.T) {
	for _, tool := range []struct {
		name, cfg string
	}{{"tofu", replayHello + helloFunctionOutput}, {"terraform", replayHello}} {
		t.Run(tool.name, func(t *testing.T) {
			bin := peers.Require(t, tool.name)
			f := newLoaderFixture(t, tool.cfg)
			env := append(f.env, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
			rec := filepath.Join(t.TempDir(), "calls.jsonl")
			mustOprov(t, env, "run", "-C", f.cfg, "--record", rec, "--", bin, "apply", "-auto-approve", "-input=false")
			data, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"oprov_recording":1`, `"call":"ApplyResourceChange"`, `"call":"ReadDataSource"`, `"grace"`} {
				if !strings.Contains(string(data), want) {
					t.Errorf("the recording lacks %s", want)
				}
			}
			if tool.name == "tofu" && !strings.Contains(string(data), `"call":"CallFunction"`) {
				t.Errorf("the recording lacks the function call")
			}

			// The registry stops, the cache goes: only the recording is left.
			f.reg.Stop()
			if err := os.RemoveAll(f.cache); err != nil {
				t.Fatal(err)
			}
			off := offlineEnv(env)
			r := oprov(t, off, "run", "-C", f.cfg, "--replay", rec, "--", bin, "plan", "-detailed-exitcode", "-input=false")
			if r.Code != 0 {
				t.Fatalf("replayed plan: exit %d, want 0 (no changes)\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			r = oprov(t, off, "run", "-C", f.cfg, "--replay", rec, "--", bin, "apply", "-auto-approve", "-input=false")
			if r.Code != 0 {
				t.Fatalf("second replayed apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			out := mustOprov(t, off, "run", "-C", f.cfg, "--replay", rec, "--", bin, "output", "-json")
			if !strings.Contains(out.Stdout, "Hello, grace!") || !strings.Contains(out.Stdout, "Hello, tofu!") {
				t.Errorf("outputs after the replayed apply: %s", out.Stdout)
			}
			if _, err := os.Stat(f.cache); err == nil {
				t.Errorf("the replay made the cache again: it installed something")
			}

			writeFile(t, filepath.Join(f.cfg, "main.tf"), strings.Replace(tool.cfg, `g = "grace"`, `g = "hopper"`, 1))
			r = oprov(t, off, "run", "-C", f.cfg, "--replay", rec, "--", bin, "plan", "-input=false", "-no-color")
			if r.Code == 0 || !strings.Contains(r.Stderr+r.Stdout, "oprov replay: the recording holds no") ||
				!strings.Contains(r.Stderr+r.Stdout, `hello_greeting.each["g"]`) || !strings.Contains(r.Stderr+r.Stdout, `now "hopper"`) {
				t.Errorf("a replayed plan with a changed attribute: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
		})
	}
}
