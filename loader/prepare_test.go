package loader

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/cache"
)

// TestPrepare: one call installs, writes the CLI configuration where install and init say it is,
// and hands back the notes on the user's own configuration instead of printing them.
func TestPrepare(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, config.FileName), "provider \"example.com/acme/dev\" {\n  source = \"./dev\"\n}\n")
	if err := os.Mkdir(filepath.Join(dir, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "main.tf"), "terraform {\n  required_providers {\n    null = { source = \"hashicorp/null\" }\n    dev = { source = \"example.com/acme/dev\" }\n  }\n}\n")
	// A user configuration that cannot be parsed stops Prepare, naming the file, before a CLI
	// configuration without it is written.
	unreadable := filepath.Join(t.TempDir(), "broken.tfrc")
	writeTestFile(t, unreadable, "provider_installation {\n")
	t.Setenv("TF_CLI_CONFIG_FILE", unreadable)
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := p.Prepare(context.Background(), Options{Cache: c}, "tofu"); err == nil || !strings.Contains(err.Error(), unreadable) {
		t.Fatalf("a broken user configuration: %v, want an error naming %s", err, unreadable)
	}
	if _, err := os.Stat(filepath.Join(dir, cliConfigPath)); !os.IsNotExist(err) {
		t.Fatalf("a CLI configuration was written without the user's: %v", err)
	}
	// OpenTofu's documented dev_overrides form (quoted keys) reads, and is kept.
	writeTestFile(t, unreadable, "provider_installation {\n  dev_overrides {\n    \"example.com/acme/dev\" = \"/src/dev\"\n  }\n  direct {}\n}\n")
	got, err := p.Prepare(context.Background(), Options{Cache: c}, "tofu")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, cliConfigPath); got.CLIConfig != want {
		t.Errorf("CLI configuration at %s, want %s", got.CLIConfig, want)
	}
	text, err := os.ReadFile(got.CLIConfig)
	if err != nil {
		t.Fatalf("the CLI configuration was not written: %v", err)
	}
	if !strings.Contains(string(text), "provider_installation") {
		t.Errorf("CLI configuration without provider_installation:\n%s", text)
	}
	if !slices.Equal(got.Unmanaged, []string{"registry.opentofu.org/hashicorp/null"}) {
		t.Errorf("unmanaged = %v", got.Unmanaged)
	}
	if !slices.Equal(got.Sources, []string{"example.com/acme/dev"}) {
		t.Errorf("kept as source = %v", got.Sources)
	}
	if !strings.Contains(string(text), `"example.com/acme/dev" = "/src/dev"`) {
		t.Errorf("the user's dev_overrides were not kept:\n%s", text)
	}
	t.Logf("notes: %q\n%s", got.Notes, text)
}
