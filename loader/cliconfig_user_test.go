package loader

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/tofufiles"
)

// TestCLIConfigKeepsUserForms: the user's dev_overrides (quoted keys, after another method in
// their file) come first, then oprov's mirror, then their methods with the managed providers
// excluded; a .tfrc.json's credentials are kept; HCL 1 reads the result back.
func TestCLIConfigKeepsUserForms(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("TF_CLI_CONFIG_FILE", "")
	t.Setenv("TERRAFORM_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	writeTestFile(t, filepath.Join(home, ".tofurc"), "provider_installation {\n  network_mirror {\n    url = \"https://mirror.example/\"\n    trust_all_hashes = true\n  }\n  dev_overrides {\n    \"hashicorp/null\" = \"/src/null\"\n  }\n}\n")
	if err := os.MkdirAll(filepath.Join(home, ".terraform.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(home, ".terraform.d", "credentials.tfrc.json"), `{"credentials": {"app.terraform.io": {"token": "tok"}}}`)
	user, err := readUserCLIConfig(UserCLIFiles("tofu", ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := cliConfig([]Installed{{Addr: "example.com/acme/hello", MirrorRoot: "/cache/${HOME}/m"}}, user)
	text, err := cfg.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	back, err := tofufiles.ParseCLIConfig("written", text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var kinds []string
	for _, m := range back.Installation.Methods {
		kinds = append(kinds, m.Kind)
	}
	if got := strings.Join(kinds, " "); got != "dev_overrides filesystem_mirror network_mirror" {
		t.Errorf("methods %s:\n%s", got, text)
	}
	nm := back.Installation.Methods[2]
	if nm.URL != "https://mirror.example/" || strings.Join(nm.Exclude, ",") != "example.com/acme/hello" || len(nm.Other) != 1 {
		t.Errorf("network_mirror: %+v", nm)
	}
	if fm := back.Installation.Methods[1]; fm.Path != "/cache/${HOME}/m" {
		t.Errorf("mirror path read back as %q", fm.Path)
	}
	if len(back.Settings) != 1 || back.Settings[0].Name() != `credentials "app.terraform.io"` {
		t.Errorf("settings: %+v\n%s", back.Settings, text)
	}
}
