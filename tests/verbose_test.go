package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// goPluginInternal is a line of go-plugin's own, from either end: its client in oprov (starting
// the process, the handshake, the stdio stream) or its server inside the provider, whose lines
// reach oprov on the provider's stderr and carry the provider's logger name (provider.EXECUTABLE:
// provider.3 for a provider started from a verified file descriptor). Each message is one
// go-plugin logs (client.go, server.go, grpc_stdio.go, of every version a provider may carry).
var goPluginInternal = regexp.MustCompile(`(?m)^.*\[(?:DEBUG|TRACE|INFO)\] provider[^:]*: (?:` + strings.Join([]string{
	`plugin address`, `starting plugin`, `plugin started`, `waiting for RPC address`, `using plugin`,
	`plugin exited`, `plugin process exited`, `plugin server`, `configuring server automatic mTLS`,
	`stdio`, `received EOF`, `reattached plugin process exited`, `setting up plugin`,
}, "|") + `).*$`)

var debugLine = regexp.MustCompile(`(?m)^.*\[(?:DEBUG|TRACE)\] .*$`)

// sdkLine is a line a Go SDK logs about a request (terraform-plugin-go, the framework, SDKv2):
// the debug level's, not -v's.
var sdkLine = regexp.MustCompile(`(?m)^.*\[(?:DEBUG|TRACE)\] provider[^:]*: .*@module=sdk\..*$`)

// runVerbose runs 'oprov run -v -- tofu apply' in cfg, then at the debug level (-vv, and -v with
// OPROV_DEBUG_PLUGIN=1), and checks that go-plugin's own lines and the SDKs' request logs show
// only at the debug level, while oprov's launch line always does.
func runVerbose(t *testing.T, tofu, cfg string, env []string, sdk bool) {
	t.Helper()
	plan := []string{"run", "-v", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false", "-no-color"}
	r := mustOprov(t, env, plan...)
	if !strings.Contains(r.Stderr, "oprov: launched ") {
		t.Errorf("run -v did not say what it launched:\n%.3000s", r.Stderr)
	}
	t.Logf("run -v: %d lines on stderr, %d at DEBUG or TRACE", strings.Count(r.Stderr, "\n"), len(debugLine.FindAllString(r.Stderr, -1)))
	if lines := goPluginInternal.FindAllString(r.Stderr, -1); len(lines) > 0 {
		t.Errorf("run -v printed %d of go-plugin's own lines, such as %q", len(lines), lines[0])
	}
	if l := sdkLine.FindString(r.Stderr); l != "" {
		t.Errorf("run -v printed the SDK's request logs, such as %q", l)
	}
	vv := append([]string{"run", "-vv"}, plan[2:]...)
	for name, r := range map[string]result{"-vv": mustOprov(t, env, vv...), "OPROV_DEBUG_PLUGIN=1": mustOprov(t, append(env, "OPROV_DEBUG_PLUGIN=1"), plan...)} {
		if goPluginInternal.FindString(r.Stderr) == "" || !strings.Contains(r.Stderr, "oprov: launched ") {
			t.Errorf("%s did not show go-plugin's own lines, so the check above proves nothing:\n%.3000s", name, r.Stderr)
		}
		if sdk && sdkLine.FindString(r.Stderr) == "" {
			t.Errorf("%s did not show the SDK's request logs:\n%.3000s", name, r.Stderr)
		}
	}
}

// TestRunVerboseShowsNoPluginInternals: 'oprov run -v' shows oprov's lines and the providers'
// own, never go-plugin's DEBUG and TRACE internals nor the Go SDKs' request logs, whatever kind
// of provider: installed from a registry, kept as Go source, as a Python project, or a stdio
// provider (oprov's own host speaks go-plugin for it). -vv or OPROV_DEBUG_PLUGIN=1 adds them.
func TestRunVerboseShowsNoPluginInternals(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	t.Run("registry", func(t *testing.T) {
		f := newLoaderFixture(t, helloConfig)
		runVerbose(t, tofu, f.cfg, f.env, true)
	})
	t.Run("go source", func(t *testing.T) {
		cfg := t.TempDir()
		if err := os.CopyFS(filepath.Join(cfg, "p"), os.DirFS(filepath.Join(repoRoot, "examples", "hello"))); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(cfg, "main.tf"), helloConfig)
		writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/hello\" {\n  source = \"./p\"\n}\n")
		env := []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + t.TempDir()}
		runVerbose(t, tofu, cfg, env, true)
	})
	t.Run("python", func(t *testing.T) {
		cfg, _, env := pySourceConfig(t)
		runVerbose(t, tofu, cfg, env, false)
	})
	t.Run("stdio", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "kv.json")
		writeFile(t, db, `{}`)
		cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", fmt.Sprintf(kvReplay, db, ""))
		runVerbose(t, tofu, cfg, env, false)
	})
}
