package source

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/pybuild"
)

// pythonKind is a Python project: installed with pip into a venv.
var pythonKind = LocalKind{
	Name:   "Python project (pyproject.toml)",
	Detect: pybuild.IsPyProject,
	Open: func(d LocalDir, env *Env) LocalSource {
		return &builtHere{d: d, env: env, reused: "source, cached venv", build: func(ctx context.Context, env *Env) (*cache.Build, error) { return pythonBuild(ctx, d, env.logf) }}
	},
}

// pythonBuild says how to install a Python provider kept as source into a venv with pip: the
// key covers the source tree (every file's name and content) and the interpreter (its version and
// path). The executable is a small script that runs the project's console script
// terraform-provider-TYPE with the venv's python.
func pythonBuild(ctx context.Context, s LocalDir, logf func(string, ...any)) (*cache.Build, error) {
	python, err := pybuild.HostPython()
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", s.Addr, err)
	}
	proj, err := pybuild.ReadPyProject(s.Dir)
	if err != nil {
		return nil, err
	}
	entry, err := proj.ProviderEntry(s.Addr.Type)
	if err != nil {
		return nil, fmt.Errorf("%s: provider %s: %w", s.At, s.Addr, err)
	}
	ident, err := exec.CommandContext(ctx, python, "-c", "import sys; print(sys.version); print(sys.executable)").Output()
	if err != nil {
		return nil, fmt.Errorf("provider %s: running %s: %w", s.Addr, python, err)
	}
	key, err := treeHash(s.Dir, "python\x00record\x00"+strings.TrimSpace(string(ident))+"\x00"+Host().String(), pybuild.PySkip)
	if err != nil {
		return nil, err
	}
	name := "terraform-provider-" + s.Addr.Type
	return &cache.Build{Key: "py-" + key, Name: name, Fresh: "source, venv built", Make: func(ctx context.Context, dir string) error {
		logf("oprov: installing %s from %s into a venv with pip (once per change of its source)", s.Addr, s.Dir)
		return buildVenv(ctx, python, s.Dir, dir, name, entry)
	}}, nil
}

// buildVenv makes tmp/venv (no pip of its own: the host's pip installs into it), installs the
// project there, and writes the launcher tmp/NAME. A venv holds no path of its own apart from
// the scripts pip writes, which the launcher does not use, so the directory can be renamed.
func buildVenv(ctx context.Context, python, dir, tmp, name, entry string) error {
	venv := filepath.Join(tmp, "venv")
	if out, err := exec.CommandContext(ctx, python, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		return fmt.Errorf("creating a venv with %s: %v\n%s", python, err, out)
	}
	if err := pybuild.PipInstallInto(ctx, python, filepath.Join(venv, "bin", "python"), dir, tmp); err != nil {
		return err
	}
	script := fmt.Sprintf("#!/bin/sh\n# %s kept as source, installed in the venv beside this file by oprov.\nexec \"${0%%/*}/venv/bin/python\" -I -c '%s' \"$@\"\n",
		name, pybuild.PythonEntryCode(name, entry, false))
	if err := writeLauncher(tmp, Launcher{Kind: LauncherVenv}); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(tmp, name), []byte(script), 0o755)
}
