package pybuild

import (
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/release"
)

// FuzzPyProject: any pyproject.toml parses or fails without panicking, and an entry point that
// ProviderEntry accepts is safe inside the launcher's single-quoted Python code.
func FuzzPyProject(f *testing.F) {
	f.Add([]byte("[project]\nname = \"p\"\n[project.scripts]\nterraform-provider-x = \"x.main:main\"\n"))
	f.Add([]byte("[tool.poetry.scripts]\nterraform-provider-x = \"x:app.run [extra]\"\n"))
	f.Add([]byte("[project.scripts]\nterraform-provider-x = \"x'; echo:y\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePyProject("dir", data)
		if err != nil {
			return
		}
		for _, typ := range p.ProviderTypes() {
			entry, err := p.ProviderEntry(typ)
			if err != nil {
				continue
			}
			code := PythonEntryCode(release.ProviderPrefix+typ, entry, true)
			if strings.ContainsAny(entry, "'\\\"\n ") || strings.Contains(code, "'") {
				t.Fatalf("entry %q gives launcher code that breaks its quoting:\n%s", entry, code)
			}
		}
	})
}
