package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// TestRemoteSourceOverSSH: examples/hello kept as Go source beside the configuration, with a
// remote block, through a real sshd. The near side builds it for the platform the far side
// reports and ships it; the far side runs it (apply reads the far user's greeting file, which the
// far sandbox block for it allows) only under a far configuration whose host block names it in
// allow_source; with no sandbox block for it there, it runs in the default sandbox and cannot
// read that file. Under a far configuration
// that names another address, or with none, it is refused before anything runs, naming the far
// setting.
func TestRemoteSourceOverSSH(t *testing.T) {
	far := farSide(t)
	tofu := peers.Require(t, "tofu")
	cfg := t.TempDir()
	if err := os.CopyFS(filepath.Join(cfg, "providers", "hello"), os.DirFS(filepath.Join(repoRoot, "examples", "hello"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(remoteHelloConfig, "      version = \"~> 1.0\"\n", "", 1))
	env := []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + t.TempDir()}

	// The far operator's configurations, in the far user's home, where only that user reads.
	farConfig := func(name, text string) string {
		p := filepath.Join(far.home, name)
		writeFile(t, p, text)
		if err := runCmd("chown", remoteUser+":", p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
		return p
	}
	allows := farConfig("source-allowed.hcl", "host {\n  allow_source = [\"example.com/acme/hello\"]\n}\nsandbox \"example.com/acme/hello\" {\n  read = [\"~/greeting\"]\n}\n")
	boxed := farConfig("source-boxed.hcl", "host {\n  allow_source = [\"example.com/acme/hello\"]\n}\n")
	other := farConfig("source-other.hcl", "host {\n  allow_source = [\"example.com/acme/other\"]\n}\n")

	apply := func(hostArgs ...string) result {
		writeFile(t, filepath.Join(cfg, "oprov.hcl"), "provider \"example.com/acme/hello\" {\n  source = \"./providers/hello\"\n}\n"+far.remoteBlock(hostArgs...))
		return oprov(t, env, "run", "-v", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
	}

	r := apply("--config", allows)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Howdy, remote!") {
		t.Fatalf("a source provider the far configuration allows: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "building example.com/acme/hello from ") || !strings.Contains(r.Stderr, "the far side's platform") {
		t.Errorf("-v does not say the provider is built for the far side:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, `on remote "example.com/acme/hello" (ssh)`) {
		t.Errorf("-v does not say the provider runs remotely:\n%s", r.Stderr)
	}

	// With no sandbox block for it, the far side runs code no one signed in the default sandbox:
	// the far user's files are out of its reach.
	r = apply("--config", boxed)
	if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "Cannot read the greeting file") {
		t.Errorf("a source provider the far configuration allows, without a sandbox block for it, read the far user's file: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	r = apply("--config", other)
	if r.Code == 0 || !strings.Contains(r.Stderr, "built from source") || !strings.Contains(r.Stderr, "allow_source in the host block at "+other) || strings.Contains(r.Stdout, "Howdy") {
		t.Errorf("a source provider the far configuration does not name: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	r = apply("--require-sandbox")
	if r.Code == 0 || !strings.Contains(r.Stderr, "allow_source in a host block of the far side's --config") || strings.Contains(r.Stdout, "Howdy") {
		t.Errorf("a source provider to a far side with no configuration: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
