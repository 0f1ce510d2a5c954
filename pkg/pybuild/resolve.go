package pybuild

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/oprov/oprov/manifest"
)

// A pin is one exact version of a distribution: a line name==version of a constraints file.
type pin struct{ Name, Version string }

func (p pin) String() string { return p.Name + "==" + p.Version }

// resolution is the one set of dependency versions every platform and CPython version installs.
type resolution struct {
	// File is a constraints file pinning every dependency the resolution chose.
	File string
	// Pins are those pins, by normalized name.
	Pins map[string]pin
	// Links is the directory of wheels built from source distributions, "" when none.
	Links string
}

// resolve resolves the dependencies of wheel once, under the given constraints files, for one
// target (platform p, CPython pyVersion: binary wheels only, as every install takes them), and
// writes what pip chose as exact pins into outDir/resolved.txt, which every platform's install
// then takes as constraints: unpinned dependencies get the same version everywhere, not each
// platform's newest.
//
// When the target has no wheel of some dependency, that dependency may be published only as a
// source distribution: the dependencies are then resolved on the build machine (pip download,
// which takes sdists), each sdist among them is built into a wheel once, into outDir/built, and
// the target is resolved again with those wheels. A built wheel that is not pure Python
// (py3-none-any) is refused, naming it: it would run only on this machine's platform and CPython.
//
// project, the project's own name, is left out of the pins.
func resolve(ctx context.Context, python, wheel, project string, constraints []string, p manifest.Platform, pyVersion, outDir string) (*resolution, error) {
	res := &resolution{File: filepath.Join(outDir, "resolved.txt"), Pins: map[string]pin{}}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	err := res.resolveFor(ctx, python, wheel, project, constraints, p, pyVersion, filepath.Join(outDir, "report.json"))
	if err != nil && noWheels(err) && ctx.Err() == nil {
		links, berr := buildSdists(ctx, python, wheel, constraints, outDir)
		if berr != nil {
			return nil, berr
		}
		if links != "" {
			res.Links = links
			err = res.resolveFor(ctx, python, wheel, project, constraints, p, pyVersion, filepath.Join(outDir, "report.json"))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("resolving the dependencies for %s, CPython %s: %w", p, pyVersion, err)
	}
	if err := writePipFile(res.File, res.lines()); err != nil {
		return nil, err
	}
	return res, nil
}

// resolveFor runs pip's resolver for one target without installing (pip install --dry-run
// --report) and reads the versions it chose into r.Pins.
func (r *resolution) resolveFor(ctx context.Context, python, wheel, project string, constraints []string, p manifest.Platform, pyVersion, report string) error {
	tags, err := pipPlatforms(p)
	if err != nil {
		return err
	}
	// --target only because pip takes --platform with it; --dry-run writes nothing there.
	args := []string{"install", "--dry-run", "--ignore-installed", "--report", report, "--target", filepath.Join(filepath.Dir(report), "never"),
		"--python-version", pyVersion, "--implementation", "cp", "--only-binary=:all:"}
	for _, t := range tags {
		args = append(args, "--platform", t)
	}
	for _, c := range constraints {
		args = append(args, "-c", c)
	}
	if r.Links != "" {
		args = append(args, "--find-links", r.Links)
	}
	if err := pip(ctx, python, append(args, wheel)...); err != nil {
		return err
	}
	data, err := os.ReadFile(report)
	if err != nil {
		return err
	}
	var rep struct {
		Install []struct {
			IsDirect bool `json:"is_direct"`
			Metadata struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"metadata"`
		} `json:"install"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("reading pip's report %s: %w", report, err)
	}
	for _, d := range rep.Install {
		m := d.Metadata
		if d.IsDirect || m.Name == "" || m.Version == "" || normalizeName(m.Name) == normalizeName(project) {
			continue
		}
		r.Pins[normalizeName(m.Name)] = pin{m.Name, m.Version}
	}
	return nil
}

// buildSdists resolves the dependencies on the build machine with pip download, which takes a
// source distribution where there is no wheel, and builds each sdist among them into a wheel in
// outDir/built. It gives that directory, or "" when no dependency came as source.
func buildSdists(ctx context.Context, python, wheel string, constraints []string, outDir string) (string, error) {
	dl := filepath.Join(outDir, "download")
	defer os.RemoveAll(dl)
	args := []string{"download", "-d", dl}
	for _, c := range constraints {
		args = append(args, "-c", c)
	}
	if err := pip(ctx, python, append(args, wheel)...); err != nil {
		return "", fmt.Errorf("resolving the dependencies on this machine, to find those published only as source: %w", err)
	}
	entries, err := os.ReadDir(dl)
	if err != nil {
		return "", err
	}
	built := ""
	for _, e := range entries {
		if _, sdist, ok := distFile(e.Name()); ok && sdist {
			built = filepath.Join(outDir, "built")
			if err := buildSdist(ctx, python, filepath.Join(dl, e.Name()), outDir, built); err != nil {
				return "", err
			}
		}
	}
	return built, nil
}

// lines are the resolution's pins as lines of a constraints file, sorted.
func (r *resolution) lines() []string {
	lines := make([]string, 0, len(r.Pins))
	for _, p := range r.Pins {
		lines = append(lines, p.String())
	}
	sort.Strings(lines)
	return lines
}

// distFile reads the name and version of a distribution file pip downloaded: a wheel
// NAME-VERSION(-BUILD)-PY-ABI-PLATFORM.whl (its name holds no "-"), or a source distribution
// NAME-VERSION.tar.gz or .zip (older ones may have "-" in the name: the version is after the last).
func distFile(file string) (p pin, sdist, ok bool) {
	if base, isWheel := strings.CutSuffix(file, ".whl"); isWheel {
		parts := strings.Split(base, "-")
		if len(parts) < 5 {
			return pin{}, false, false
		}
		return pin{parts[0], parts[1]}, false, true
	}
	for _, ext := range []string{".tar.gz", ".zip"} {
		if base, isSdist := strings.CutSuffix(file, ext); isSdist {
			i := strings.LastIndex(base, "-")
			if i <= 0 || i == len(base)-1 {
				return pin{}, false, false
			}
			return pin{base[:i], base[i+1:]}, true, true
		}
	}
	return pin{}, false, false
}

// buildSdist builds one source distribution into a wheel with pip wheel (isolated, with the same
// index settings as every other pip run) and moves it into built, refusing a compiled one.
func buildSdist(ctx context.Context, python, sdist, scratch, built string) error {
	name := filepath.Base(sdist)
	one := filepath.Join(scratch, "one")
	defer os.RemoveAll(one)
	if err := pip(ctx, python, "wheel", "-q", "--no-deps", "-w", one, sdist); err != nil {
		return fmt.Errorf("building a wheel of the source distribution %s: %w", name, err)
	}
	wheels, _ := filepath.Glob(filepath.Join(one, "*.whl"))
	if len(wheels) != 1 {
		return fmt.Errorf("building a wheel of the source distribution %s gave %d wheels, want 1", name, len(wheels))
	}
	if err := checkPureWheel(filepath.Base(wheels[0])); err != nil {
		return err
	}
	if err := os.MkdirAll(built, 0o755); err != nil {
		return err
	}
	return os.Rename(wheels[0], filepath.Join(built, filepath.Base(wheels[0])))
}

// checkPureWheel refuses a wheel built from a source distribution unless its tags say pure
// Python (abi "none", platform "any"), naming the package and version.
func checkPureWheel(file string) error {
	parts := strings.Split(strings.TrimSuffix(file, ".whl"), "-")
	if len(parts) < 5 {
		return fmt.Errorf("the wheel %s built from a source distribution has no tags", file)
	}
	name, version := parts[0], parts[1]
	abi, plat := parts[len(parts)-2], parts[len(parts)-1]
	if abi == "none" && plat == "any" {
		return nil
	}
	return fmt.Errorf("%s %s is published only as a source distribution, and it compiles (it builds %s, for this machine alone): oprov builds pure-Python sdists only; pin a version of %s that has wheels, or drop it", name, version, file, name)
}

// newestWheel gives the newest version of the distribution name, no newer than atMost and
// within the constraints files, that has a wheel for platform p and CPython pyVersion (pip
// download --no-deps of that one wheel), or "" when it has none. links is where wheels built
// from sdists are.
func newestWheel(ctx context.Context, python, name, atMost, links string, constraints []string, p manifest.Platform, pyVersion string) (string, error) {
	tags, err := pipPlatforms(p)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "oprov-wheel-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	args := oneWheelArgs(tmp, tags, pyVersion)
	if links != "" {
		args = append(args, "--find-links", links)
	}
	for _, c := range constraints {
		args = append(args, "-c", c)
	}
	if err := pip(ctx, python, append(args, name+"<="+atMost)...); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if noWheels(err) {
			return "", nil
		}
		return "", err
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if d, _, ok := distFile(e.Name()); ok {
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("pip download of %s<=%s for %s, CPython %s saved no wheel", name, atMost, p, pyVersion)
}
