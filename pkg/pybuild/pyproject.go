package pybuild

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"

	"github.com/oprov/oprov/pkg/providerrelease"
)

// PyProject is what oprov reads of a Python project's pyproject.toml: its name and console
// scripts ([project.scripts], or Poetry's [tool.poetry.scripts]).
type PyProject struct {
	Dir            string
	Name           string
	RequiresPython string            // [project] requires-python, such as ">=3.11"
	Scripts        map[string]string // script name -> entry point "module:attr"
}

// IsPyProject reports whether dir holds a pyproject.toml.
func IsPyProject(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "pyproject.toml"))
	return err == nil && st.Mode().IsRegular()
}

// ReadPyProject reads dir/pyproject.toml.
func ReadPyProject(dir string) (*PyProject, error) {
	path := filepath.Join(dir, "pyproject.toml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s is not a Python project: %w", dir, err)
	}
	return parsePyProject(dir, data)
}

// parsePyProject parses the contents of dir/pyproject.toml.
func parsePyProject(dir string, data []byte) (*PyProject, error) {
	path := filepath.Join(dir, "pyproject.toml")
	var doc struct {
		Project struct {
			Name           string            `toml:"name"`
			RequiresPython string            `toml:"requires-python"`
			Scripts        map[string]string `toml:"scripts"`
		} `toml:"project"`
		Tool struct {
			Poetry struct {
				Name    string            `toml:"name"`
				Scripts map[string]string `toml:"scripts"`
			} `toml:"poetry"`
		} `toml:"tool"`
	}
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p := &PyProject{Dir: dir, Name: doc.Project.Name, RequiresPython: doc.Project.RequiresPython, Scripts: map[string]string{}}
	if p.Name == "" {
		p.Name = doc.Tool.Poetry.Name
	}
	for k, v := range doc.Tool.Poetry.Scripts {
		p.Scripts[k] = v
	}
	for k, v := range doc.Project.Scripts {
		p.Scripts[k] = v
	}
	return p, nil
}

// ProviderTypes lists the provider types the project's console scripts name
// (terraform-provider-TYPE).
func (p *PyProject) ProviderTypes() []string {
	var out []string
	for k := range p.Scripts {
		if t, ok := providerrelease.TypeFromName(k); ok {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// entryPoint matches a console script's "module.path:object.path", which is all oprov runs.
var entryPoint = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
})

// ProviderEntry is the entry point of the console script terraform-provider-TYPE, or an error that
// says how to declare it.
func (p *PyProject) ProviderEntry(typ string) (string, error) {
	script := providerrelease.ProviderPrefix + typ
	entry, ok := p.Scripts[script]
	if !ok {
		have := "it declares none"
		if len(p.Scripts) > 0 {
			var names []string
			for k := range p.Scripts {
				names = append(names, k)
			}
			sort.Strings(names)
			have = "it declares " + strings.Join(names, ", ")
		}
		return "", fmt.Errorf("%s: no console script %s (%s): add\n  [project.scripts]\n  %s = \"yourpackage.main:main\"\nwhose function calls tf.runner.run_provider", filepath.Join(p.Dir, "pyproject.toml"), script, have, script)
	}
	entry = strings.ReplaceAll(entry, " ", "")
	if i := strings.Index(entry, "["); i >= 0 { // extras: "mod:fn [extra]"
		entry = entry[:i]
	}
	if !entryPoint().MatchString(entry) {
		return "", fmt.Errorf("%s: console script %s = %q is not of the form module:function", filepath.Join(p.Dir, "pyproject.toml"), script, entry)
	}
	return entry, nil
}

// HostPython is the Python oprov builds with: $OPROV_PYTHON, else python3 on PATH.
func HostPython() (string, error) {
	name := "python3"
	if p := os.Getenv("OPROV_PYTHON"); p != "" {
		name = p
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", errors.New("building a Python provider needs Python 3 with pip: put python3 on PATH, or set OPROV_PYTHON to an interpreter")
	}
	return path, nil
}

// PySkip says which entries of a Python project are not its source: hidden files and
// directories (.venv, .git), bytecode, and what builds leave behind (build/, dist/,
// *.egg-info). They are neither hashed nor copied.
func PySkip(name string, isDir bool) bool {
	switch {
	case strings.HasPrefix(name, "."):
		return true
	case isDir:
		return name == "__pycache__" || name == "build" || name == "dist" || strings.HasSuffix(name, ".egg-info")
	}
	return strings.HasSuffix(name, ".pyc")
}

// copyPyProject copies a Python project's source (what PySkip keeps) into dst, which pip then
// builds from: pip builds in the tree it is given, and the user's tree stays untouched.
func copyPyProject(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if p != src && PySkip(d.Name(), d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil // sockets, links: not source pip needs
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
