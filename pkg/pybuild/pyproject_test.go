package pybuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/providerrelease"
)

func TestPyProjectEntry(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "pyproject.toml"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("[project]\nname = \"p\"\n[project.scripts]\nterraform-provider-foo = \"foo.cli:app.run\"\nother = \"x:y\"\n")
	p, err := ReadPyProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ProviderTypes(); len(got) != 1 || got[0] != "foo" {
		t.Errorf("types %v", got)
	}
	if e, err := p.ProviderEntry("foo"); err != nil || e != "foo.cli:app.run" {
		t.Errorf("entry %q, %v", e, err)
	}
	if _, err := p.ProviderEntry("bar"); err == nil || !strings.Contains(err.Error(), "no console script terraform-provider-bar (it declares other, terraform-provider-foo)") {
		t.Errorf("missing script: %v", err)
	}
	if code := PythonEntryCode("terraform-provider-foo", "foo.cli:app.run", false); !strings.Contains(code, "from foo.cli import app\nsys.exit(app.run())") {
		t.Errorf("entry code:\n%s", code)
	}
	write("[tool.poetry]\nname = \"p\"\n[tool.poetry.scripts]\nterraform-provider-foo = \"foo'; rm -rf /:x\"\n")
	if p, err = ReadPyProject(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ProviderEntry("foo"); err == nil || !strings.Contains(err.Error(), "not of the form module:function") {
		t.Errorf("a hostile entry point was accepted: %v", err)
	}
	write("[project\n")
	if _, err := ReadPyProject(dir); err == nil {
		t.Error("a broken pyproject.toml was accepted")
	}
}

// FuzzPyProject: any pyproject.toml parses or fails without panicking, and an entry point that
// ProviderEntry accepts is safe inside the launcher's single-quoted Python code.
func FuzzPyProject(f *testing.F) {
	f.Add([]byte("[project]\nname = \"p\"\n[project.scripts]\nterraform-provider-x = \"x.main:main\"\n"))
	f.Add([]byte("[tool.poetry.scripts]\nterraform-provider-x = \"x:app.run [extra]\"\n"))
	f.Add([]byte("[project.scripts]\nterraform-provider-x = \"x'; echo:y\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parsePyProject("dir", data)
		if err != nil {
			return
		}
		for _, typ := range p.ProviderTypes() {
			entry, err := p.ProviderEntry(typ)
			if err != nil {
				continue
			}
			code := PythonEntryCode(providerrelease.ProviderPrefix+typ, entry, true)
			if strings.ContainsAny(entry, "'\\\"\n ") || strings.Contains(code, "'") {
				t.Fatalf("entry %q gives launcher code that breaks its quoting:\n%s", entry, code)
			}
		}
	})
}
