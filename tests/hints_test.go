package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// TestHintsWorkWhenPasted: what oprov tells a user to run does what it says when pasted into a
// shell. One loader fixture (a TLS registry with hello 1.0.0 signed) serves every case.
func TestHintsWorkWhenPasted(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig)

	t.Run("install -C prints a line that initialises that directory", func(t *testing.T) {
		parent := t.TempDir()
		copyDir(t, f.freshCopy(t), filepath.Join(parent, "infra"))
		r := oprovIn(t, parent, f.env, "install", "-C", "infra")
		if r.Code != 0 {
			t.Fatalf("install: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		_, line, ok := strings.Cut(r.Stdout, "\nRun: ")
		line, _, _ = strings.Cut(line, "\n")
		if !ok || line == "" {
			t.Fatalf("install printed no Run: line:\n%s", r.Stdout)
		}
		sh := exec.Command("sh", "-c", line+" -input=false")
		sh.Dir = parent
		sh.Env = append(os.Environ(), append(f.env, "PATH="+filepath.Dir(tofu)+string(os.PathListSeparator)+os.Getenv("PATH"))...)
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Fatalf("the pasted line %q failed: %v\n%s", line, err, out)
		}
		if _, err := os.Stat(filepath.Join(parent, "infra", ".terraform", "providers")); err != nil {
			t.Errorf("the pasted line %q did not initialise infra (%v):\n%s", line, err, out)
		}
		expectPreinstalled(t, string(out))
	})

	t.Run("push without --address says which address it assumed", func(t *testing.T) {
		r := mustOprov(t, f.env, "push", helloRelease(t), f.reg.Host+"/providers/acme/guessed")
		if !strings.Contains(r.Stderr, "assumes the provider's source address is registry.opentofu.org/acme/hello, guessed from "+f.reg.Host+"/providers/acme/guessed") || !strings.Contains(r.Stderr, "give --address") {
			t.Errorf("push without --address did not say what it assumed: %q", r.Stderr)
		}
		if r := mustOprov(t, f.env, "push", helloRelease(t), f.reg.Host+"/providers/acme/guessed", "--address", "example.com/acme/guessed"); strings.Contains(r.Stderr, "assumes") {
			t.Errorf("push with --address still assumed: %q", r.Stderr)
		}
	})

	t.Run("--plain-http against a TLS registry", func(t *testing.T) {
		r := oprov(t, f.env, "inspect", f.repo, "--plain-http")
		if r.Code != 3 || !strings.Contains(r.Stderr, "drop --plain-http") || strings.Contains(r.Stderr, "response status code") {
			t.Errorf("exit %d, stderr %q; want exit 3 and 'drop --plain-http'", r.Code, r.Stderr)
		}
	})

	t.Run("a serve template the shell emptied", func(t *testing.T) {
		// "HOST/providers/${namespace}/${type}" in double quotes, as the shell passes it on.
		r := oprov(t, f.env, "serve", f.reg.Host+"/providers//")
		if r.Code != 2 || !strings.Contains(r.Stderr, "single quotes") || !strings.Contains(r.Stderr, "'"+f.reg.Host+"/providers/${namespace}/${type}'") {
			t.Errorf("exit %d, stderr %q", r.Code, r.Stderr)
		}
	})

	t.Run("run and init without tofu", func(t *testing.T) {
		env := append(f.env, "PATH="+t.TempDir(), "OPROV_TOFU=")
		for _, args := range [][]string{{"run", "-C", f.freshCopy(t), "--", "tofu", "plan"}, {"init", "-C", f.freshCopy(t)}} {
			r := oprov(t, env, args...)
			// 127: the command was not found, as docker run and env say it.
			if r.Code != 127 || !strings.Contains(r.Stderr, "install OpenTofu, or set OPROV_TOFU") {
				t.Errorf("oprov %s: exit %d, stderr %q", args[0], r.Code, r.Stderr)
			}
		}
	})

	t.Run("init -C a missing directory names the directory before tofu", func(t *testing.T) {
		r := oprov(t, append(f.env, "OPROV_TOFU=no-such-tofu"), "init", "-C", filepath.Join(t.TempDir(), "missing"))
		// 125: oprov's own usage error, which tofu's codes cannot be taken for.
		if r.Code != 125 || !strings.Contains(r.Stderr, "-C: no such directory") || strings.Contains(r.Stderr, "no-such-tofu") {
			t.Errorf("exit %d, stderr %q", r.Code, r.Stderr)
		}
	})
}

// TestLockInitServeAgreeOnTheVersion: with a signed 1.0.0 and an unsigned 1.1.0 under ~> 1.0,
// lock, init and serve all choose 1.0.0, and lock says why 1.1.0 was skipped.
func TestLockInitServeAgreeOnTheVersion(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig)
	versionedHello(t, f.reg, "providers/acme/hello", "1.1.0") // not signed

	dir := f.freshCopy(t)
	r := mustOprov(t, f.env, "lock", "-C", dir)
	if !strings.Contains(r.Stderr, "chose 1.0.0; skipped the newer 1.1.0: not signed") || !strings.Contains(r.Stderr, "oprov sign "+f.repo+":1.1.0") {
		t.Errorf("lock does not say why 1.1.0 was skipped: %q", r.Stderr)
	}
	if lock, _ := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl")); !bytes.Contains(lock, []byte(`version     = "1.0.0"`)) {
		t.Errorf("lock chose another version:\n%s", lock)
	}

	dir = f.freshCopy(t)
	r = mustOprov(t, append(f.env, "OPROV_TOFU="+tofu), "init", "-C", dir)
	if !strings.Contains(r.Stdout, "example.com/acme/hello v1.0.0") {
		t.Errorf("init did not install 1.0.0:\n%s%s", r.Stdout, r.Stderr)
	}

	s := startServe(t, f.env, false, append(serveFromRegistry(t, f.reg.Host, f.reg.CAFile), "--key", filepath.Join(f.keys, "cosign.pub"))...)
	if code, _, body := s.get(t, helloPath+"index.json"); code != 200 || !bytes.Contains(body, []byte(`"1.0.0"`)) || bytes.Contains(body, []byte(`"1.1.0"`)) {
		t.Errorf("serve lists %d %s, want 1.0.0 only", code, body)
	}
}

// oprovIn runs oprov in dir.
func oprovIn(t testing.TB, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(oprovBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{Stdout: out.String(), Stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestStdioProviderWorksWhereTofuDoes: a stdio provider runs in tofu's working directory (its
// command still found in its own), so ${path.module}/kv.json is the configuration's file; under
// sandbox "*" {} the refused write gets the suggestion docs/sandbox.md promises.
func TestStdioProviderWorksWhereTofuDoes(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	const tf = `terraform {
  required_providers {
    kv = { source = "example.com/acme/kv" }
  }
}
provider "kv" { path = "${path.module}/kv.json" }
resource "kv_entry" "a" {
  key   = "a"
  value = "one"
}
`
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", tf)
	r := oprov(t, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if r.Code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if db := readKV(t, filepath.Join(cfg, "kv.json")); db["a"].Value != "one" {
		t.Errorf("the configuration's kv.json holds %v", db)
	}
	if _, err := os.Stat(filepath.Join(cfg, "p", "kv.json")); err == nil {
		t.Errorf("the provider wrote ${path.module}/kv.json into its own directory")
	}

	t.Run("refused under a sandbox, with the suggestion", func(t *testing.T) {
		hcl := mustRead(t, filepath.Join(cfg, "oprov.hcl"))
		writeFile(t, filepath.Join(cfg, "oprov.hcl"), hcl+"sandbox \"*\" {}\n")
		defer writeFile(t, filepath.Join(cfg, "oprov.hcl"), hcl)
		r := oprov(t, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
		want := fmt.Sprintf("write = [%q]", cfg)
		// As tofu shows it (beside the error) or oprov's stderr does; tofu wraps long lines.
		if flat := strings.Join(strings.Fields(r.Stdout+r.Stderr), " "); r.Code == 0 || !strings.Contains(flat, "Errno 13") || !strings.Contains(flat, want) {
			t.Errorf("exit %d; want the refusal and the suggestion %s\n%s%s", r.Code, want, r.Stdout, r.Stderr)
		}
	})
}
