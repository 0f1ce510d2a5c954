package tfcreds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/tfcredstest"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEnvName(t *testing.T) {
	for host, want := range map[string]string{
		"app.terraform.io":             "TF_TOKEN_app_terraform_io",
		"my-registry.example.com":      "TF_TOKEN_my__registry_example_com",
		"Registry.Example.COM:443":     "TF_TOKEN_registry_example_com",
		"café.example":                 "TF_TOKEN_xn____caf__dma_example",
		"xn--caf-dma.example":          "TF_TOKEN_xn____caf__dma_example",
		"localhost:8443":               "", // no variable name can hold the port
		"not_a_host.example":           "",
		"registry.example.com.":        "TF_TOKEN_registry_example_com",
		"a-b-c.d-e.example:443":        "TF_TOKEN_a__b__c_d__e_example",
		"[::1]:5000":                   "",
		"terraform.example.org:00443x": "",
	} {
		if got := EnvName(host); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestNormalize(t *testing.T) {
	for host, want := range map[string]string{
		"Example.COM":       "example.com",
		"example.com:443":   "example.com",
		"example.com:8443":  "example.com:8443",
		"BÜCHER.example":    "xn--bcher-kva.example",
		"127.0.0.1:443":     "127.0.0.1",
		"[::1]:5000":        "[::1]:5000",
		"localhost:54321":   "localhost:54321",
		"registry.example.": "registry.example",
	} {
		if got, err := Normalize(host); err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", host, got, err, want)
		}
	}
	for _, bad := range []string{"", "a_b.example", "exa mple.com", "example.com:44x"} {
		if _, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) took it", bad)
		}
	}
}

// TestLookupEnv: TF_TOKEN_ variables in every spelling OpenTofu reads, and ahead of the files.
func TestLookupEnv(t *testing.T) {
	home := tfcredstest.Isolate(t, EnvPrefix)
	write(t, filepath.Join(home, ".tofurc"), `credentials "my-registry.example.com" { token = "from-file" }`)
	t.Setenv("TF_TOKEN_my__registry_example_com", "from-env")
	t.Setenv("TF_TOKEN_APP_TERRAFORM_IO", "upper")
	t.Setenv("TF_TOKEN_xn____caf__dma_example", "puny")
	t.Setenv("TF_TOKEN_unset_example", "")
	for host, want := range map[string]Token{
		"my-registry.example.com": {"from-env", "TF_TOKEN_my__registry_example_com"},
		"app.terraform.io":        {"upper", "TF_TOKEN_APP_TERRAFORM_IO"},
		"café.example":            {"puny", "TF_TOKEN_xn____caf__dma_example"},
		"CAFÉ.example:443":        {"puny", "TF_TOKEN_xn____caf__dma_example"},
	} {
		got, err := Lookup(host)
		if err != nil || got == nil || *got != want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", host, got, err, want)
		}
	}
	if got, err := Lookup("unset.example"); got != nil || err != nil {
		t.Errorf("an empty variable counted: %+v, %v", got, err)
	}
}

// TestLookupFiles: credentials blocks in TF_CLI_CONFIG_FILE, ~/.tofurc before ~/.terraformrc,
// and credentials.tfrc.json; a broken file is reported without hiding a token found elsewhere.
func TestLookupFiles(t *testing.T) {
	home := tfcredstest.Isolate(t, EnvPrefix)
	write(t, filepath.Join(home, ".terraformrc"), `credentials "a.example" { token = "terraformrc" }`)
	write(t, filepath.Join(home, ".tofurc"), `
plugin_cache_dir = "/tmp/cache"
provider_installation {
  direct {}
}
credentials "A.Example:443" {
  token = "tofurc"
}
credentials "localhost:8443" {
  token = "with-port"
}
`)
	write(t, filepath.Join(home, ".terraform.d", "credentials.tfrc.json"), `{"credentials": {"b.example": {"token": "logged-in"}}}`)
	rc := filepath.Join(home, ".tofurc")
	creds := filepath.Join(home, ".terraform.d", "credentials.tfrc.json")
	for host, want := range map[string]*Token{
		"a.example":      {"tofurc", rc},
		"localhost:8443": {"with-port", rc},
		"localhost:8444": nil,
		"b.example":      {"logged-in", creds},
		"c.example":      nil,
	} {
		got, err := Lookup(host)
		if err != nil || (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", host, got, err, want)
		}
	}

	other := filepath.Join(t.TempDir(), "cli.tfrc")
	write(t, other, `credentials "a.example" { token = "from-TF_CLI_CONFIG_FILE" }`)
	t.Setenv("TF_CLI_CONFIG_FILE", other)
	if got, err := Lookup("a.example"); err != nil || got == nil || got.Value != "from-TF_CLI_CONFIG_FILE" {
		t.Errorf("TF_CLI_CONFIG_FILE: %+v, %v", got, err)
	}

	// Read as OpenTofu reads it (HCL 1), which finds the error at the closing brace.
	write(t, other, "credentials \"a.example\" {\n  token = \n}\n")
	got, err := Lookup("b.example")
	if got == nil || got.Value != "logged-in" || err == nil || !strings.Contains(err.Error(), other+":3") {
		t.Errorf("a broken CLI configuration: %+v, %v", got, err)
	}
	write(t, other, `credentials "a.example" { token = 42 }`)
	if _, err := Lookup("a.example"); err == nil || !strings.Contains(err.Error(), "not a string") {
		t.Errorf("a token that is not a string: %v", err)
	}
}

// TestLookupBesideDevOverrides: a CLI configuration in OpenTofu's documented form, dev_overrides
// with quoted keys (which HCL 2 cannot parse), still gives its credentials.
func TestLookupBesideDevOverrides(t *testing.T) {
	home := tfcredstest.Isolate(t, EnvPrefix)
	write(t, filepath.Join(home, ".tofurc"), `
provider_installation {
  dev_overrides {
    "hashicorp/null" = "/src/null"
  }
  direct {}
}
credentials "a.example" {
  token = "beside-overrides"
}
`)
	if got, err := Lookup("a.example"); err != nil || got == nil || got.Value != "beside-overrides" {
		t.Errorf("Lookup = %+v, %v", got, err)
	}
}
