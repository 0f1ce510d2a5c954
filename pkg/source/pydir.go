package source

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/internal/build/pybuild"
	"github.com/oprov/oprov/pkg/cache"
)

func init() {
	registerLocalKind(LocalKind{
		Name:   "Python project (pyproject.toml)",
		Detect: pybuild.IsPyProject,
		Open: func(d LocalDir, env *Env) LocalSource {
			return &builtHere{d: d, env: env, fresh: "source, venv built", reused: "source, cached venv",
				build: func(ctx context.Context, env *Env) (*Built, error) { return buildPython(ctx, env.Cache, d, env.logf) }}
		},
	})
}

// buildPython installs a Python provider kept as source into a venv in the cache, with pip,
// unless the cache already holds one for the same source tree (every file's name and content)
// and interpreter (its version and path). The executable is a small script that runs the
// project's console script terraform-provider-TYPE with the venv's python.
func buildPython(ctx context.Context, c *cache.Cache, s LocalDir, logf func(string, ...any)) (*Built, error) {
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
	key, err := treeHash(s.Dir, "python\x00"+strings.TrimSpace(string(ident))+"\x00"+Host().String(), pybuild.PySkip)
	if err != nil {
		return nil, err
	}
	key = "py-" + key
	name := "terraform-provider-" + s.Addr.Type
	out := &Built{Addr: s.Addr.String(), Executable: filepath.Join(c.BuildDir(key), name), Key: key}
	out.Rebuilt, err = buildOnce(ctx, c, key, name, func(tmp string) error {
		logf("oprov: installing %s from %s into a venv with pip (once per change of its source)", s.Addr, s.Dir)
		return buildVenv(ctx, python, s.Dir, tmp, name, entry)
	})
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", s.Addr, err)
	}
	return out, nil
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
	return os.WriteFile(filepath.Join(tmp, name), []byte(script), 0o755)
}
