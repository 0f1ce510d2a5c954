package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// TestOneRegistrationPerName: oprov links its own protocol messages and terraform-plugin-go's
// (for the stdio host), and protobuf panics on a second registration of a name when
// GOLANG_PROTOBUF_REGISTRATION_CONFLICT=panic. With that set, oprov starts, and oprov run applies
// through a stdio provider (oprov __stdio-host, on terraform-plugin-go's server) and a Go provider
// (oprov's client reads its schema for the proxy).
func TestOneRegistrationPerName(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	const conflict = "GOLANG_PROTOBUF_REGISTRATION_CONFLICT=panic"

	r := mustOprov(t, []string{conflict}, "--version")
	if strings.Contains(r.Stderr, "panic") {
		t.Fatalf("oprov --version:\n%s", r.Stderr)
	}

	db := filepath.Join(t.TempDir(), "kv.json")
	writeFile(t, db, `{"seed": {"value": "planted", "revision": 7}}`)
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", fmt.Sprintf(kvConfig, db, kvFunctionOutput))
	env = append(env, conflict)
	mustOprov(t, env, "run", "-v", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	if got := readKV(t, db)["b"].Value; got != "kv:a" {
		t.Errorf("through the stdio provider, kv b = %q, want kv:a", got)
	}

	cfg = t.TempDir()
	if err := os.CopyFS(filepath.Join(cfg, "providers", "hello"), os.DirFS(filepath.Join(repoRoot, "examples", "hello"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), helloConfig)
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/hello\" {\n  source = \"./providers/hello\"\n}\naudit {\n  path = \"audit.jsonl\"\n}\n")
	env = []string{conflict, "OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + t.TempDir()}
	mustOprov(t, env, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	expectHelloOutputs(t, tofu, cfg, env, false)
	if b, err := os.ReadFile(filepath.Join(cfg, "audit.jsonl")); err != nil || !strings.Contains(string(b), "hello_greeting") {
		t.Errorf("the audit, which decodes calls against the schema oprov's client read, holds no hello_greeting call (%v):\n%.500s", err, b)
	}
}
