package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestPackagePythonRefusals: what package --python refuses before running pip.
func TestPackagePythonRefusals(t *testing.T) {
	ios, _, _ := testIO()
	example, _ := filepath.Abs("../../examples/pyhello")
	noScript := t.TempDir()
	os.WriteFile(filepath.Join(noScript, "pyproject.toml"), []byte("[project]\nname = \"x\"\n"), 0o644)
	for _, c := range []struct {
		dir, name, platform, want string
	}{
		{example, "", "windows_amd64", "package: Python providers cannot be packaged for windows_amd64: the launcher is a POSIX shell script, and tofu on Windows needs an .exe"},
		{example, "", "linux_386", "oprov knows the wheel tags of linux and darwin on amd64 and arm64 only"},
		{example, "other", "linux_amd64", "no console script terraform-provider-other (it declares terraform-provider-pyhello)"},
		{noScript, "", "linux_amd64", "declares 0 console scripts named terraform-provider-TYPE (pass --name TYPE)"},
		{t.TempDir(), "x", "linux_amd64", "is not a Python project"},
	} {
		out := t.TempDir()
		o := &packageOptions{io: ios, PyDir: c.dir, Name: c.name, Version: "1.0.0", Platforms: []string{c.platform}, OutDir: out, output: textOut}
		wantErrorContaining(t, runPackage(context.Background(), o), c.want)
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("a refused package left %d files in %s", len(entries), out)
		}
	}
}
