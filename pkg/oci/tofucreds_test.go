package oci

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/tofufiles"
)

// TestTofuCredentialFiles: a credentials file OpenTofu would not find (DOCKER_CONFIG,
// --registry-config) is named, followed by the default files that exist; one it finds on its own
// is not; a missing file is never named.
func TestTofuCredentialFiles(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("REGISTRY_AUTH_FILE", "")
	docker := filepath.Join(home, ".docker", "config.json")
	write := func(p string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(`{"auths":{}}`), 0o600)
	}
	other := filepath.Join(t.TempDir(), "config.json")
	t.Setenv("DOCKER_CONFIG", filepath.Dir(other))
	if got := TofuCredentialFiles(""); got != nil {
		t.Errorf("a DOCKER_CONFIG without config.json gave %v", got)
	}
	write(other)
	write(docker)
	if got, want := TofuCredentialFiles(""), []string{other, docker}; !reflect.DeepEqual(got, want) {
		t.Errorf("DOCKER_CONFIG: %v, want %v", got, want)
	}
	t.Setenv("DOCKER_CONFIG", filepath.Dir(docker))
	if got := TofuCredentialFiles(""); got != nil {
		t.Errorf("DOCKER_CONFIG=~/.docker is found by tofu on its own, yet gave %v", got)
	}
	if got, want := TofuCredentialFiles(other), []string{other, docker}; !reflect.DeepEqual(got, want) {
		t.Errorf("--registry-config: %v, want %v", got, want)
	}
	block := (&tofufiles.CLIConfig{Settings: TofuCredentials([]string{other})}).String()
	if !strings.HasPrefix(block, "oci_default_credentials {") || !strings.Contains(block, `docker_style_config_files = ["`+filepath.ToSlash(other)+`"]`) {
		t.Errorf("block:\n%s", block)
	}
}
