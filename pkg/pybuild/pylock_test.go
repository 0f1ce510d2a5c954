package pybuild

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const testPyLock = `lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11"

[[packages]]
name = "grpcio"
version = "1.67.1"

[[packages]]
name = "Protobuf"
version = "5.28.3"
marker = "python_version >= '3.11'"

[[packages]]
name = "terraform_provider.pyhello"
version = "0.0.0"

[[packages]]
name = "local-lib"
[packages.directory]
path = "../local-lib"
`

// TestProjectPinsPyLock: pylock.toml's versions become the constraints pip gets, in a file still
// named pylock.toml (the messages name it); it comes before constraints.txt and requirements.txt.
func TestProjectPinsPyLock(t *testing.T) {
	dir, scratch := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "requirements.txt"), []byte("grpcio==1.85.1\n"), 0o644)
	got, err := projectPins(dir, "terraform-provider-pyhello", "", scratch)
	if err != nil || got != filepath.Join(scratch, "requirements.txt") {
		t.Fatalf("without pylock.toml: %q %v, want requirements.txt", got, err)
	}
	os.WriteFile(filepath.Join(dir, "pylock.toml"), []byte(testPyLock), 0o644)
	got, err = projectPins(dir, "terraform-provider-pyhello", "", scratch)
	if err != nil || got != filepath.Join(scratch, "pylock.toml") {
		t.Fatalf("with pylock.toml: %q %v", got, err)
	}
	data, _ := os.ReadFile(got)
	want := []string{"grpcio==1.67.1", "Protobuf==5.28.3 ; python_version >= '3.11'"}
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); !reflect.DeepEqual(lines, want) {
		t.Errorf("constraints %q, want %q", lines, want)
	}
	for _, line := range want {
		if m := pinLine().FindStringSubmatch(line); m == nil {
			t.Errorf("%q is not read back as a pin", line)
		}
	}
}

func TestPyLockBad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pylock.toml")
	os.WriteFile(p, []byte("lock-version = \"2.0\"\n"), 0o644)
	if _, err := pyLockPins(p, "x"); err == nil || !strings.Contains(err.Error(), "lock-version 2.0") {
		t.Errorf("lock-version 2.0: %v", err)
	}
	os.WriteFile(p, []byte("[[packages]]\nversion = \"1\"\n"), 0o644)
	if _, err := pyLockPins(p, "x"); err == nil || !strings.Contains(err.Error(), "no name") {
		t.Errorf("nameless package: %v", err)
	}
}
