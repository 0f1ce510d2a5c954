package pybuild

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/oprov/oprov/manifest"
)

// PythonVersions are the CPython minor versions a Python release package may claim when
// --python-versions does not choose: those of them that the project's requires-python admits and
// for which every dependency has wheels on every platform. The launcher picks the set matching
// the target's python3. The tf SDK needs 3.11 or later.
var PythonVersions = []string{"3.11", "3.12", "3.13", "3.14"}

// defaultPlatforms are the platforms `oprov package --python` builds when none are named.
var defaultPlatforms = []manifest.Platform{
	{OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"},
	{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"},
}

// pipPlatforms are the wheel platform tags pip may pick for a target: manylinux glibc 2.17 to
// 2.28 on Linux, macOS 11 and later on macOS (pip widens a macosx tag to older versions and
// universal2 itself).
func pipPlatforms(p manifest.Platform) ([]string, error) {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[p.Arch]
	switch {
	case p.OS == "linux" && arch != "":
		var tags []string
		for minor := 28; minor >= 17; minor-- {
			tags = append(tags, fmt.Sprintf("manylinux_2_%d_%s", minor, arch))
		}
		return append(tags, "manylinux2014_"+arch), nil
	case p.OS == "darwin" && p.Arch == "amd64":
		return []string{"macosx_11_0_x86_64"}, nil
	case p.OS == "darwin" && p.Arch == "arm64":
		return []string{"macosx_11_0_arm64"}, nil
	case p.OS == "windows":
		//lint:ignore ST1005 "Python" is a name, capitalised wherever it stands
		return nil, fmt.Errorf("Python providers cannot be packaged for %s: the launcher is a POSIX shell script, and tofu on Windows needs an .exe (leave windows out with --platform)", p)
	}
	//lint:ignore ST1005 "Python" is a name, capitalised wherever it stands
	return nil, fmt.Errorf("Python providers cannot be packaged for %s: oprov knows the wheel tags of linux and darwin on amd64 and arm64 only", p)
}

// cpTag is "cp311" for "3.11".
func cpTag(v string) string { return "cp" + strings.ReplaceAll(v, ".", "") }

// pip runs python -m pip with args; its output is kept for the error.
func pip(ctx context.Context, python string, args ...string) error {
	cmd := exec.CommandContext(ctx, python, append([]string{"-m", "pip", "--disable-pip-version-check", "--no-input"}, args...)...)
	cmd.Env = append(os.Environ(), "PIP_NO_WARN_SCRIPT_LOCATION=1", "PYTHONDONTWRITEBYTECODE=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tail := strings.TrimSpace(out.String())
		if i := strings.Index(tail, "ERROR:"); i > 0 {
			tail = tail[i:] // pip's progress before its error says nothing of the cause
		}
		if len(tail) > 3000 {
			tail = "..." + tail[len(tail)-3000:]
		}
		return fmt.Errorf("pip %s failed (%v):\n%s", pipCommand(args), err, tail)
	}
	return nil
}

// pipCommand names pip's subcommand among its arguments, for messages.
func pipCommand(args []string) string {
	for i, a := range args {
		if a == "--python" {
			return pipCommand(args[i+2:])
		}
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// buildWheel builds the project in dir into a wheel in outDir with the host's pip, from a copy
// of its source (pip builds in place), and checks that it is pure Python: a compiled project
// would only run where it was built.
func buildWheel(ctx context.Context, python, dir, outDir string) (string, error) {
	src := filepath.Join(outDir, "src")
	if err := copyPyProject(dir, src); err != nil {
		return "", fmt.Errorf("copying %s to build it: %w", dir, err)
	}
	defer os.RemoveAll(src)
	if err := pip(ctx, python, "wheel", "--no-deps", "-q", "-w", outDir, src); err != nil {
		return "", fmt.Errorf("building a wheel of %s: %w", dir, err)
	}
	wheels, _ := filepath.Glob(filepath.Join(outDir, "*.whl"))
	if len(wheels) != 1 {
		return "", fmt.Errorf("building a wheel of %s gave %d wheels, want 1", dir, len(wheels))
	}
	if !strings.HasSuffix(wheels[0], "-none-any.whl") {
		return "", fmt.Errorf("%s builds the platform wheel %s: oprov packages pure-Python providers (compiled dependencies come as wheels from PyPI)", dir, filepath.Base(wheels[0]))
	}
	return wheels[0], nil
}

// installForTarget installs a wheel and its dependencies into target for one platform and one
// CPython version, with pip, from binary wheels only, under the author's pins (a requirements or
// constraints file, "" when none) and the one resolution every target installs. Files that vary
// between runs or serve only this machine are removed (see cleanSite).
//
// When a pinned version has no wheel for this target, the error says which: the author's pin,
// naming the pins file, or a *missingWheel for a version the resolution chose.
func installForTarget(ctx context.Context, python, wheel, target, author string, res *resolution, extra []string, p manifest.Platform, pyVersion string) error {
	tags, err := pipPlatforms(p)
	if err != nil {
		return err
	}
	// Not -q: pip names the constraint that conflicts only when it is not quiet.
	args := []string{"install", "--target", target, "--python-version", pyVersion, "--implementation", "cp",
		"--only-binary=:all:", "--no-compile", "--no-warn-conflicts"}
	for _, t := range tags {
		args = append(args, "--platform", t)
	}
	for _, c := range append(append([]string{author}, extra...), res.File) {
		if c != "" {
			args = append(args, "-c", c)
		}
	}
	if res.Links != "" {
		args = append(args, "--find-links", res.Links)
	}
	err = pip(ctx, python, append(args, wheel)...)
	if err == nil {
		return cleanSite(target)
	}
	if ctx.Err() != nil {
		return err
	}
	err = fmt.Errorf("installing dependencies for %s, CPython %s: %w", p, pyVersion, err)
	if !noWheels(err) {
		return err // not for want of a distribution: a full disk, a broken wheel
	}
	unmet := normalizeName(unmetName(err))
	if author != "" {
		if name, version := authorPinFor(ctx, python, author, unmet, tags, pyVersion); name != "" {
			return fmt.Errorf("%s pins %s==%s, which has no wheel for %s, CPython %s (pin a version with wheels for every platform, or leave %s out with --platform)", filepath.Base(author), name, version, p, pyVersion, p)
		}
	}
	if got, ok := res.Pins[unmet]; ok && unmet != "" {
		return &missingWheel{Pin: got, Platform: p, PyVersion: pyVersion, err: err}
	}
	return err
}

// missingWheel is a failed install for want of a wheel of the version the resolution chose.
type missingWheel struct {
	Pin       pin
	Platform  manifest.Platform
	PyVersion string
	err       error
}

func (m *missingWheel) Error() string {
	return fmt.Sprintf("%s, which the dependencies resolve to, has no wheel for %s, CPython %s: %v", m.Pin, m.Platform, m.PyVersion, m.err)
}

// unmetPattern finds the requirement pip could not satisfy in its error output.
var unmetPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:No matching distribution found for|Could not find a version that satisfies the requirement|The user requested \(constraint\)) ([A-Za-z0-9][A-Za-z0-9_.\-]*)`)
})

// unmetName gives the name of the distribution pip found no fitting file of ("" when its output
// names none).
func unmetName(err error) string {
	if m := unmetPattern().FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return ""
}

// pinLine is one exact pin of a requirements or constraints file: name==version.
var pinLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9_.\-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;#,]+)`)
})

// authorPinFor finds, after pip failed for want of a distribution, the author's exact pin that
// has no wheel for these platform tags and CPython version: the pin of unmet (the distribution
// pip's error names) when the pins file has one and pip finds no wheel of it alone (with one,
// the failure is a conflict, not the pin's); when pip named none, the first pin without an
// environment marker (one with a marker may not apply to this target) that has no wheel. It
// gives "" when the failure is not the author's pin.
func authorPinFor(ctx context.Context, python, pins, unmet string, tags []string, pyVersion string) (string, string) {
	data, err := os.ReadFile(pins)
	if err != nil {
		return "", ""
	}
	var candidates [][]string
	for _, line := range strings.Split(string(data), "\n") {
		m := pinLine().FindStringSubmatch(line)
		switch {
		case m == nil:
		case unmet != "":
			if normalizeName(m[1]) == unmet {
				candidates = [][]string{m}
			}
		case !strings.Contains(line, ";"):
			candidates = append(candidates, m)
		}
	}
	for _, m := range candidates {
		if !hasWheel(ctx, python, m[1], m[2], tags, pyVersion) && ctx.Err() == nil {
			return m[1], m[2]
		}
	}
	return "", ""
}

// hasWheel reports whether pip finds a wheel of name==version for these platform tags and
// CPython version, asking for that one wheel alone. A failure for any other reason than want of
// a distribution counts as found: the caller must not blame the version for it.
func hasWheel(ctx context.Context, python, name, version string, tags []string, pyVersion string) bool {
	tmp, err := os.MkdirTemp("", "oprov-pin-")
	if err != nil {
		return true
	}
	defer os.RemoveAll(tmp)
	err = pip(ctx, python, append(oneWheelArgs(tmp, tags, pyVersion), name+"=="+version)...)
	return err == nil || !noWheels(err)
}

// cleanSite makes a pip --target directory the same on every run: console-script wrappers
// (bin/, pointing at this machine's python), bytecode caches and direct_url.json (the wheel's
// temporary path) go, and each RECORD keeps only the lines of files still there.
func cleanSite(site string) error {
	if err := os.RemoveAll(filepath.Join(site, "bin")); err != nil {
		return err
	}
	var records []string
	err := filepath.WalkDir(site, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "__pycache__":
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			return filepath.SkipDir
		case !d.IsDir() && (strings.HasSuffix(p, ".pyc") || d.Name() == "direct_url.json"):
			return os.Remove(p)
		case !d.IsDir() && d.Name() == "RECORD":
			records = append(records, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range records {
		if err := pruneRecord(site, r); err != nil {
			return err
		}
	}
	return nil
}

// pruneRecord drops the lines of a RECORD file that name files no longer in site.
func pruneRecord(site, record string) error {
	data, err := os.ReadFile(record)
	if err != nil {
		return err
	}
	var kept []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		name, _, _ := strings.Cut(line, ",")
		if name == "" || strings.HasPrefix(name, "..") {
			continue
		}
		if st, err := os.Stat(filepath.Join(site, filepath.FromSlash(name))); err == nil && st.Mode().IsRegular() {
			kept = append(kept, line)
		}
	}
	sort.Strings(kept)
	return os.WriteFile(record, []byte(strings.Join(kept, "\n")+"\n"), 0o644)
}

// PipInstallInto installs the project in dir, with its dependencies, into the venv whose python
// is venvPython, using the host's pip (pip's --python, pip 22.3 and later), from a copy of its
// source made in scratch.
func PipInstallInto(ctx context.Context, python, venvPython, dir, scratch string) error {
	src := filepath.Join(scratch, "src")
	if err := copyPyProject(dir, src); err != nil {
		return fmt.Errorf("copying %s to install it: %w", dir, err)
	}
	defer os.RemoveAll(src)
	if err := pip(ctx, python, "--python", venvPython, "install", "-q", src); err != nil {
		return fmt.Errorf("installing %s: %w", dir, err)
	}
	return nil
}

// oneWheelArgs are pip's arguments to download into dir one wheel (no dependencies) fitting these
// platform tags and CPython version; the requirement follows.
func oneWheelArgs(dir string, tags []string, pyVersion string) []string {
	args := []string{"download", "-q", "--no-deps", "--only-binary=:all:", "-d", dir, "--python-version", pyVersion, "--implementation", "cp"}
	for _, t := range tags {
		args = append(args, "--platform", t)
	}
	return args
}
