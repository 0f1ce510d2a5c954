package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

var (
	hostileOnce  sync.Once
	hostileCache string
)

// tcpCounter accepts TCP connections on 127.0.0.1 and counts them.
type tcpCounter struct {
	net.Listener
	n atomic.Int32
}

func listenCounting(t testing.TB) *tcpCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &tcpCounter{Listener: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return l
}

func (l *tcpCounter) port() int { return l.Addr().(*net.TCPAddr).Port }

// hostileSetup lays out a configuration that keeps tests/providers/hostile as source, with a home
// holding a planted key and .bashrc, a directory the sandbox block may declare, and two listeners:
// one no block names, one the block may name. It gives the directory, the environment, the
// listeners and the declared directory.
type hostileSetup struct {
	cfg, home, allowed string
	env                []string
	unnamed, named     *tcpCounter
}

func newHostile(t *testing.T, sandboxHCL string) *hostileSetup {
	t.Helper()
	hostileOnce.Do(func() { hostileCache, _ = os.MkdirTemp("", "oprov-hostile-cache-") })
	h := &hostileSetup{cfg: t.TempDir(), home: t.TempDir(), allowed: t.TempDir(), unnamed: listenCounting(t), named: listenCounting(t)}
	writeFile(t, filepath.Join(h.home, ".ssh", "id_ed25519"), "PLANTED-PRIVATE-KEY\n")
	writeFile(t, filepath.Join(h.home, ".bashrc"), "# the user's own\n")
	writeFile(t, filepath.Join(h.allowed, "config.txt"), "DECLARED-CONTENT\n")
	copyDir(t, filepath.Join(repoRoot, "tests", "providers", "hostile"), filepath.Join(h.cfg, "hostile"))
	writeFile(t, filepath.Join(h.cfg, "main.tf"), fmt.Sprintf(`terraform {
  required_providers {
    hostile = { source = "example.com/acme/hostile" }
  }
}
resource "hostile_probe" "p" {
  read_path       = %q
  write_path      = %q
  connect         = "127.0.0.1:%d"
  exec            = "/bin/sh"
  ptrace          = true
  read_allowed    = %q
  connect_allowed = "127.0.0.1:%d"
  env             = ["HOSTILE_SECRET", "HOSTILE_PASSED"]
}
output "report" { value = hostile_probe.p.report }
`, filepath.Join(h.home, ".ssh", "id_ed25519"), filepath.Join(h.home, ".bashrc"), h.unnamed.port(),
		filepath.Join(h.allowed, "config.txt"), h.named.port()))
	hcl := "provider \"example.com/acme/hostile\" {\n  source = \"./hostile\"\n}\n" +
		strings.NewReplacer("ALLOWED", h.allowed, "NAMED_PORT", fmt.Sprint(h.named.port())).Replace(sandboxHCL)
	writeFile(t, filepath.Join(h.cfg, "oprov.hcl"), hcl)
	h.env = []string{"OPROV_CACHE_DIR=" + hostileCache, "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"HOME=" + h.home, "HOSTILE_SECRET=s3cret", "HOSTILE_PASSED=yes"}
	return h
}

// apply runs 'oprov run -v -- tofu apply' and gives what the provider reported and oprov's result.
func (h *hostileSetup) apply(t *testing.T, tofu string, extraEnv ...string) (map[string]string, result) {
	t.Helper()
	r := oprov(t, append(h.env, extraEnv...), "run", "-v", "-C", h.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if r.Code != 0 {
		return nil, r
	}
	var outputs map[string]struct{ Value map[string]string }
	tofuJSON(t, tofu, h.cfg, h.env, &outputs, "output", "-json")
	return outputs["report"].Value, r
}

const declaredSandbox = `sandbox "example.com/acme/*" {
  read    = ["ALLOWED"]
  connect = [NAMED_PORT]
  env     = ["HOSTILE_PASSED"]
}
`

// TestSandboxHostileProvider: a provider that reads a planted private key, writes ~/.bashrc,
// connects to a port nobody named, runs /bin/sh and traces its parent does all of it without a
// sandbox block, and is refused each under the default sandbox, while what the block declares
// (a path, a port, a variable) works.
func TestSandboxHostileProvider(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	t.Run("no sandbox", func(t *testing.T) {
		h := newHostile(t, "")
		rep, r := h.apply(t, tofu)
		if rep == nil {
			t.Fatalf("apply without a sandbox failed: %s", r.Stderr)
		}
		for k, want := range map[string]string{"read": "ok: PLANTED-PRIVATE-KEY", "write": "ok: appended", "connect": "ok: connected",
			"exec": "ok: ran", "ptrace": "ok: seized", "env:HOSTILE_SECRET": "set"} {
			if !strings.HasPrefix(rep[k], want) {
				t.Errorf("without a sandbox, %s: the provider saw %q, want %q", k, rep[k], want)
			}
		}
		if h.unnamed.n.Load() == 0 {
			t.Error("without a sandbox, the listener saw no connection")
		}
		if !strings.Contains(r.Stderr, "under no sandbox") {
			t.Errorf("oprov run -v does not say the provider runs under no sandbox:\n%s", r.Stderr)
		}
	})
	t.Run("default sandbox", func(t *testing.T) {
		h := newHostile(t, declaredSandbox)
		rep, r := h.apply(t, tofu)
		if rep == nil {
			t.Fatalf("apply under the sandbox failed: %s", r.Stderr)
		}
		for k, want := range map[string]string{"read": "refused: ", "write": "refused: ", "connect": "refused: ", "exec": "refused: ",
			"ptrace": "refused: operation not permitted", "env:HOSTILE_SECRET": "absent",
			"read_allowed": "ok: DECLARED-CONTENT", "connect_allowed": "ok: connected", "env:HOSTILE_PASSED": "set"} {
			if !strings.HasPrefix(rep[k], want) {
				t.Errorf("under the sandbox, %s: the provider saw %q, want %q", k, rep[k], want)
			}
		}
		for _, k := range []string{"read", "write", "connect", "exec"} {
			if !strings.Contains(rep[k], "permission denied") {
				t.Errorf("under the sandbox, %s was refused, but not by a permission check: %q", k, rep[k])
			}
		}
		if n := h.unnamed.n.Load(); n != 0 {
			t.Errorf("the listener on the unnamed port saw %d connections", n)
		}
		if h.named.n.Load() == 0 {
			t.Error("the listener on the declared port saw no connection")
		}
		if b, _ := os.ReadFile(filepath.Join(h.home, ".bashrc")); string(b) != "# the user's own\n" {
			t.Errorf("~/.bashrc was changed: %q", b)
		}
		if !strings.Contains(r.Stderr, `under sandbox "example.com/acme/*" at `) || !strings.Contains(r.Stderr, "Landlock ABI") {
			t.Errorf("oprov run -v does not say which sandbox the provider runs under:\n%s", r.Stderr)
		}
		// The provider logged its refusals on stderr: oprov says which line would allow each.
		// Those lines reach oprov over go-plugin's stdio stream, which can lose the last of them
		// when the provider is stopped (seen once in three runs of the whole suite): at least one
		// suggestion must be there, and each missing one is logged (pkg/sandbox's tests check
		// every kind of line).
		said := 0
		for _, want := range []string{fmt.Sprintf(`add read = [%q]`, filepath.Join(h.home, ".ssh", "id_ed25519")),
			fmt.Sprintf("add connect = [%d]", h.unnamed.port()), `add execute = ["/bin/sh"]`} {
			if strings.Contains(r.Stderr, want) {
				said++
			} else {
				t.Logf("oprov did not suggest %q this run", want)
			}
		}
		if said == 0 {
			t.Errorf("oprov suggests no sandbox line for the provider's refusals:\n%s", r.Stderr)
		}
	})

}

// TestSandboxHintInDiagnostics: with an audit, a proxy stands between tofu and the provider: the
// error tofu shows for a refusal carries the sandbox line that would allow it, and the audit says
// which sandbox the provider ran under.
func TestSandboxHintInDiagnostics(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	h := newHostile(t, declaredSandbox+"audit {\n  path = \"audit.jsonl\"\n}\n")
	tf := mustRead(t, filepath.Join(h.cfg, "main.tf"))
	writeFile(t, filepath.Join(h.cfg, "main.tf"), strings.Replace(tf, "ptrace          = true", "ptrace          = true\n  fail_on_refusal = true", 1))
	_, r := h.apply(t, tofu)
	if r.Code == 0 {
		t.Fatal("the apply succeeded though the provider failed on its refusals")
	}
	// tofu wraps a diagnostic at its width, so how a long path's line breaks depends on the test's
	// temporary directory: the text is read with the wrapping undone.
	shown := unwrapDiagnostics(r.Stdout + r.Stderr)
	for _, want := range []string{"oprov: the provider's sandbox may have refused this", fmt.Sprintf(`add read = [%q]`, filepath.Join(h.home, ".ssh", "id_ed25519"))} {
		if !strings.Contains(shown, want) {
			t.Errorf("tofu's output does not show %q:\n%s\n%s", want, r.Stdout, r.Stderr)
		}
	}
	launches := 0
	for _, a := range readAuditLines(t, filepath.Join(h.cfg, "audit.jsonl")) {
		if a.RPC == "Launch" {
			launches++
			if !strings.HasPrefix(a.Sandbox, `sandbox "example.com/acme/*" at `) {
				t.Errorf("the audit's launch record says %q", a.Sandbox)
			}
		}
	}
	if launches != 1 {
		t.Errorf("%d launch records in the audit, want 1", launches)
	}
}

// TestSandboxFailsClosed: where the probe reports no Landlock (the test hook), a provider with a
// sandbox block does not start, and the message names what is missing and best_effort; with
// best_effort = true it starts, with a warning that says what was dropped.
func TestSandboxFailsClosed(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	h := newHostile(t, declaredSandbox)
	_, r := h.apply(t, tofu, "OPROV_TEST_LANDLOCK_ABI=0")
	if r.Code == 0 {
		t.Fatal("a sandboxed provider started where Landlock is missing")
	}
	for _, want := range []string{"example.com/acme/hostile", "cannot be enforced", "file system rules", "best_effort = true", "was not started"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.Stderr)
		}
	}
	writeFile(t, filepath.Join(h.cfg, "oprov.hcl"), strings.Replace(mustRead(t, filepath.Join(h.cfg, "oprov.hcl")), "sandbox \"example.com/acme/*\" {", "sandbox \"example.com/acme/*\" {\n  best_effort = true", 1))
	rep, r := h.apply(t, tofu, "OPROV_TEST_LANDLOCK_ABI=0")
	if rep == nil {
		t.Fatalf("best_effort did not start the provider: %s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "runs with a weaker sandbox") || !strings.Contains(r.Stderr, "TCP connect and bind rules") {
		t.Errorf("best_effort started the provider without saying what was dropped:\n%s", r.Stderr)
	}
	// What is left (seccomp, the environment) still holds.
	if !strings.HasPrefix(rep["ptrace"], "refused: ") || rep["env:HOSTILE_SECRET"] != "absent" {
		t.Errorf("under the weaker sandbox, ptrace: %q, HOSTILE_SECRET: %q", rep["ptrace"], rep["env:HOSTILE_SECRET"])
	}
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// realPython finds CPython VERSION's own executable (not a pyenv shim): what sys.executable says.
func realPython(t *testing.T, version string) string {
	t.Helper()
	cands, _ := filepath.Glob(filepath.Join(os.Getenv("HOME"), ".pyenv", "versions", version+".*", "bin", "python"+version))
	if p, err := exec.LookPath("python" + version); err == nil {
		cands = append([]string{p}, cands...)
	}
	for _, p := range cands {
		// A pyenv shim of a version that is not selected fails: the next candidate is tried.
		out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
		if err == nil {
			return strings.TrimSpace(string(out))
		}
	}
	return ""
}

// stateOutputs reads the outputs of terraform.tfstate in dir (tofu output would need an init).
func stateOutputs(t *testing.T, dir string) map[string]string {
	t.Helper()
	var st struct {
		Outputs map[string]struct{ Value any }
	}
	decodeJSON(t, mustRead(t, filepath.Join(dir, "terraform.tfstate")), &st)
	out := map[string]string{}
	for k, v := range st.Outputs {
		out[k] = fmt.Sprint(v.Value)
	}
	return out
}

// TestSandboxPython: the packaged pyhello, installed from a registry, applies under the default
// sandbox with CPython 3.11 and 3.13: the launcher (sh), the interpreter's tree, and the user's
// cache for bytecode and the SDK's certificate are allowed, and nothing else of the home is.
func TestSandboxPython(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := pyFixture(t)
	hcl := mustRead(t, filepath.Join(f.cfg, "oprov.hcl"))
	writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), hcl+"\nsandbox \"*\" {}\n")
	for _, v := range []string{"3.11", "3.13"} {
		t.Run(v, func(t *testing.T) {
			py := realPython(t, v)
			if py == "" {
				peers.Missing(t, "CPython "+v+" (python"+v+" on PATH)")
			}
			os.Remove(filepath.Join(f.cfg, "terraform.tfstate"))
			env := append(slices.Clone(f.env), "OPROV_PROVIDER_PYTHON="+py)
			r := oprov(t, env, "run", "-v", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
			if r.Code != 0 {
				t.Fatalf("pyhello under the default sandbox with %s: %s\n%s", py, r.Stdout, r.Stderr)
			}
			if !strings.Contains(r.Stderr, `under sandbox "*" at `) {
				t.Errorf("oprov run -v does not say pyhello runs under the sandbox:\n%s", r.Stderr)
			}
			outs := stateOutputs(t, f.cfg)
			if outs["message"] != "Hello, oprov!" || outs["data_message"] != "Hello, tofu!" {
				t.Errorf("pyhello's outputs under the sandbox: %v", outs)
			}
		})
	}
}

// TestSandboxPythonSource: pyhello kept as source (a venv oprov builds) applies under the default
// sandbox: the venv's interpreter leads to the tree it was made from, which is allowed.
func TestSandboxPythonSource(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	cfg, _, env := pySourceConfig(t)
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), mustRead(t, filepath.Join(cfg, "oprov.hcl"))+"sandbox \"*\" {}\n")
	r := oprov(t, env, "run", "-v", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if r.Code != 0 {
		t.Fatalf("pyhello kept as source under the default sandbox: %s\n%s", r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, `under sandbox "*" at `) {
		t.Errorf("oprov run -v does not say pyhello runs under the sandbox:\n%s", r.Stderr)
	}
	if outs := stateOutputs(t, cfg); outs["message"] != "Hello, oprov!" {
		t.Errorf("pyhello's outputs under the sandbox: %v", outs)
	}
}

var (
	ansiCodes   = regexp.MustCompile("\x1b\\[[0-9;]*m")
	wrappedLine = regexp.MustCompile(`\s*\n\s*(│\s*)?`)
)

// unwrapDiagnostics is tofu's output with its colours removed and the lines of its diagnostic
// boxes joined, as one line each.
func unwrapDiagnostics(s string) string {
	return wrappedLine.ReplaceAllString(ansiCodes.ReplaceAllString(s, ""), " ")
}
