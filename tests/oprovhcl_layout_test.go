package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/doccheck"
	"github.com/oprov/oprov/tests/testkit/peers"
)

// TestOprovHCLLayoutExample: the oci-layout block of docs/oprov-hcl.md, taken from the page as
// it is, is the oprov.hcl of a configuration; pushing the hello release with the command the
// page gives fills the layout it reads, and oprov init and a plain tofu apply then work, with no
// registry.
func TestOprovHCLLayoutExample(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "oprov-hcl.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, b := range doccheck.Parse(string(page)).Blocks {
		if b.Lang == "hcl" && strings.HasPrefix(b.Marker, "layout-example:") {
			block = b.Text
		}
	}
	if !strings.Contains(block, `repository_template = "oci-layout:`) {
		t.Fatalf("docs/oprov-hcl.md has no hcl block marked <!-- layout-example: ... --> with an oci-layout: template:\n%s", block)
	}
	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), block)
	writeFile(t, filepath.Join(cfg, "main.tf"), helloConfig)
	env := []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1", "HOME=" + t.TempDir(), "OPROV_TOFU=" + tofu}
	// The page's push, run in the configuration's directory: the layout is relative to it.
	push := exec.Command(oprovBin, "push", helloRelease(t), "oci-layout:./layouts/acme/hello", "--address", "example.com/acme/hello")
	push.Dir, push.Env = cfg, append(os.Environ(), env...)
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("oprov push into the layout: %v\n%s", err, out)
	}
	// From another directory: the template's relative path is oprov.hcl's.
	mustOprov(t, env, "init", "-C", cfg, "--", "-input=false")
	mustTofu(t, tofu, cfg, env, "apply", "-auto-approve", "-input=false")
	if _, err := os.Stat(filepath.Join(cfg, "terraform.tfstate")); err != nil {
		t.Errorf("tofu apply wrote no state: %v", err)
	}
}
