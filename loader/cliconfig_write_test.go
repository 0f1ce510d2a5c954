package loader

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteCLIConfigOnlyWhenChanged: a second install in the same place finds the CLI
// configuration as it should be and leaves the file alone; a damaged one is written again.
func TestWriteCLIConfigOnlyWhenChanged(t *testing.T) {
	t.Setenv("TF_CLI_CONFIG_FILE", "")
	t.Setenv("HOME", t.TempDir())
	p := &Project{Dir: t.TempDir()}
	res := &InstallResult{Installed: []Installed{{Addr: "example.com/acme/hello", Version: "1.0.0", Platform: "linux_amd64", MirrorRoot: "/cache/mirror/x"}}}
	path, _, err := p.WriteCLIConfig(res, "tofu")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := os.Stat(path)
	want, _ := os.ReadFile(path)
	if _, _, err := p.WriteCLIConfig(res, "tofu"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Stat(path); !os.SameFile(first, again) {
		t.Errorf("an unchanged CLI configuration was written again")
	}
	if err := os.WriteFile(path, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.WriteCLIConfig(res, "tofu"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Clean(path)); string(got) != string(want) {
		t.Errorf("a damaged CLI configuration was not rewritten: %q", got)
	}
}
