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
	// A user configuration that cannot be parsed is a note, not an error.
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
	got, err := p.Prepare(context.Background(), Options{Cache: c}, "tofu")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, CLIConfigPath); got.CLIConfig != want {
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
	if len(got.Notes) != 1 || !strings.Contains(got.Notes[0], unreadable) {
		t.Errorf("notes = %q, want one on the broken %s", got.Notes, unreadable)
	}
}
