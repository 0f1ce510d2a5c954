package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// tofuRun runs tofu (or terraform) in dir with a CLI config and a CA to trust.
func tofuRun(t testing.TB, bin, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// TF_CLI_CONFIG_FILE is cleared: a machine may export one (this one names a missing file);
	// tests that need a CLI configuration set their own.
	cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_PLUGIN_CACHE_DIR=", "TF_CLI_CONFIG_FILE=")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// tofuJSON runs tofu and decodes its standard output (warnings go to standard error).
func tofuJSON(t testing.TB, bin, dir string, env []string, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	decodeJSON(t, string(out), v)
}

func mustTofu(t testing.TB, bin, dir string, env []string, args ...string) string {
	t.Helper()
	out, err := tofuRun(t, bin, dir, env, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return out
}

// helloConfig is a configuration that uses examples/hello's resource, data source and function.
const helloConfig = `terraform {
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

resource "hello_greeting" "world" {
  name = "oprov"
}

data "hello_greeting" "tofu" {
  name = "tofu"
}

output "message" {
  value = hello_greeting.world.message
}

output "data_message" {
  value = data.hello_greeting.tofu.message
}
`

// helloFunctionOutput calls the provider function (OpenTofu >= 1.7 only).
const helloFunctionOutput = `
output "function_message" {
  value = provider::hello::greet("function")
}
`

var lockHashRE = regexp.MustCompile(`"((?:zh|h1):[^"]+)"`)

// lockHashes reads the hashes recorded for a provider in a .terraform.lock.hcl.
func lockHashes(t testing.TB, path, addr string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, `provider "`+addr+`"`)
	if i < 0 {
		t.Fatalf("%s has no entry for %s:\n%s", path, addr, s)
	}
	block := s[i:]
	if j := strings.Index(block[1:], "\nprovider "); j >= 0 {
		block = block[:j+1]
	}
	var out []string
	for _, m := range lockHashRE.FindAllStringSubmatch(block, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tofuApplyHello runs the real tofu init and apply on helloConfig with the given CLI config
// and CA, checks the outputs, and returns the configuration directory.
func tofuApplyHello(t *testing.T, tofurc, caFile string) string {
	t.Helper()
	tofu := peers.Require(t, "tofu")
	work := t.TempDir()
	rc := filepath.Join(work, "tofurc")
	writeFile(t, rc, tofurc)
	cfg := filepath.Join(work, "cfg")
	writeFile(t, filepath.Join(cfg, "main.tf"), helloConfig+helloFunctionOutput)
	env := []string{"TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + caFile}
	mustTofu(t, tofu, cfg, env, "init", "-input=false")
	mustTofu(t, tofu, cfg, env, "apply", "-auto-approve", "-input=false")
	var outputs map[string]struct{ Value string }
	tofuJSON(t, tofu, cfg, env, &outputs, "output", "-json")
	for k, want := range map[string]string{"message": "Hello, oprov!", "data_message": "Hello, tofu!", "function_message": "Hello, function!"} {
		if outputs[k].Value != want {
			t.Errorf("output %s = %q, want %q", k, outputs[k].Value, want)
		}
	}
	return cfg
}
