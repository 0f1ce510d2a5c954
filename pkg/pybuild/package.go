// Package pybuild builds providers written in Python: it reads a project's pyproject.toml,
// installs it and its dependencies with pip (per platform and CPython version for a release, or
// into a venv for a provider kept as source), and writes the launcher that runs it.
package pybuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/providerrelease"
	"golang.org/x/sync/errgroup"
)

// Options are the choices of a Python packaging beyond the release's own.
type Options struct {
	// Versions are the CPython minor versions claimed, each 3.11 or later. When none are given,
	// the claim is every version of PythonVersions that the project's requires-python admits and
	// for which pip finds wheels of every dependency on every platform.
	Versions []string
	// Pins is the author's pins file (--python-pins); "" finds one in the project (projectPins).
	Pins string
}

// Package packages the Python project in dir (a pyproject.toml whose console script
// terraform-provider-TYPE calls the provider) for each platform: the launcher as the executable,
// and lib/cpXY/ with the project and its dependencies installed by pip for that platform, for
// every claimed CPython version, less what is identical in all of them, which is stored once in
// lib/common/. The dependencies are resolved once, so every platform and version gets the same
// versions. The zips are deterministic like every other.
func Package(ctx context.Context, dir string, opts providerrelease.PackageOptions, py Options) (*providerrelease.Packaged, error) {
	proj, err := ReadPyProject(dir)
	if err != nil {
		return nil, err
	}
	chosen := len(py.Versions) > 0
	versions, err := checkVersions(py.Versions)
	if err != nil {
		return nil, err
	}
	if !chosen {
		if versions, err = admittedVersions(proj, versions); err != nil {
			return nil, err
		}
	}
	if opts.Type == "" {
		types := proj.ProviderTypes()
		if len(types) != 1 {
			return nil, fmt.Errorf("cannot tell the provider type: %s declares %d console scripts named terraform-provider-TYPE (pass --name TYPE)", filepath.Join(dir, "pyproject.toml"), len(types))
		}
		opts.Type = types[0]
	}
	entry, err := proj.ProviderEntry(opts.Type)
	if err != nil {
		return nil, err
	}
	if len(opts.Platforms) == 0 {
		opts.Platforms = defaultPlatforms
	}
	for _, p := range opts.Platforms {
		if _, err := pipPlatforms(p); err != nil {
			return nil, err
		}
	}
	if err := opts.Check(); err != nil {
		return nil, err
	}
	python, err := HostPython()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "oprov-python-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	b := &build{python: python, project: proj.Name, tmp: tmp, opts: opts}
	// The author's pins are read first: a pins file oprov refuses stops the build before pip runs.
	if b.author, err = projectPins(dir, proj.Name, py.Pins, filepath.Join(tmp, "pins")); err != nil {
		return nil, err
	}
	opts.Progressf("building a wheel of %s", dir)
	if b.wheel, err = buildWheel(ctx, python, dir, filepath.Join(tmp, "wheel")); err != nil {
		return nil, err
	}
	if versions, err = b.installAll(ctx, versions, !chosen); err != nil {
		return nil, err
	}
	if err := shareAll(ctx, opts, tmp, versions); err != nil {
		return nil, err
	}
	launcher := filepath.Join(tmp, "launcher")
	script := providerrelease.ProviderPrefix + opts.Type
	if err := os.WriteFile(launcher, []byte(Launcher(script, entry, versions)), 0o755); err != nil {
		return nil, err
	}
	var files []providerrelease.PlatformFiles
	for _, p := range opts.Platforms {
		files = append(files, providerrelease.PlatformFiles{Platform: p, Exe: launcher, Tree: filepath.Join(tmp, p.String())})
	}
	return providerrelease.Write(opts, files)
}

// shareAll stores, in every platform's tree, what the claimed versions' sets have in common once
// (shareCommon) and the large compiled extensions of all but the newest set as deltas
// (deltaExtensions), two platforms at a time.
func shareAll(ctx context.Context, opts providerrelease.PackageOptions, tmp string, versions []string) error {
	if len(versions) > 1 {
		opts.Progressf("storing once what the CPython versions share, and their extensions as deltas")
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for _, p := range opts.Platforms {
		lib := filepath.Join(tmp, p.String(), "lib")
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := shareCommon(lib, versions); err != nil {
				return err
			}
			return deltaExtensions(lib, versions)
		})
	}
	return g.Wait()
}

// build is one packaging of a Python project.
type build struct {
	python  string // the build machine's python, which runs pip
	wheel   string // the project's own wheel
	project string // its name
	author  string // the author's pins as a constraints file, "" when none
	tmp     string // the scratch directory: TMP/OS_ARCH/lib/cpXY are the installs
	opts    providerrelease.PackageOptions
}

// maxRounds bounds how many times the dependencies are resolved again because a version the
// resolution chose has no wheel for some target.
const maxRounds = 4

// installAll resolves the dependencies once and installs that one set for every platform and
// CPython version, and gives the versions installed. When a version the resolution chose has no
// wheel for some target, the newest older version that has a wheel for every target is pinned
// and all is resolved and installed again; when no older version has one, the CPython version
// is left out (drop) or the packaging fails naming the package, version and platform. With drop,
// a version for which some platform has no wheel of some dependency at all is left out too (and
// said so), as long as one version remains; without, the first failure ends it.
func (b *build) installAll(ctx context.Context, versions []string, drop bool) ([]string, error) {
	extra := map[string]pin{} // versions chosen because the resolution's had no wheel somewhere
	for round := 1; ; round++ {
		var constraints, common []string
		if b.author != "" {
			constraints = append(constraints, b.author)
		}
		if len(extra) > 0 {
			file := filepath.Join(b.tmp, fmt.Sprintf("common-%d.txt", round))
			if err := writePipFile(file, (&resolution{Pins: extra}).lines()); err != nil {
				return nil, err
			}
			common = []string{file}
			constraints = append(constraints, file)
		}
		res, err := b.resolve(ctx, constraints, &versions, drop && len(extra) == 0, filepath.Join(b.tmp, fmt.Sprintf("resolve-%d", round)))
		if err != nil {
			if len(extra) > 0 {
				return nil, fmt.Errorf("with %s, the newest versions that have wheels for every target: %w", strings.Join((&resolution{Pins: extra}).lines(), ", "), err)
			}
			return nil, err
		}
		kept, missing, err := b.installRound(ctx, res, common, versions, drop)
		if err != nil {
			return nil, err
		}
		repinned := map[string]bool{}
		for _, m := range missing {
			name := normalizeName(m.Pin.Name)
			if !slices.Contains(kept, m.PyVersion) || repinned[name] {
				continue // left out already, or another target of a version being replaced
			}
			if _, again := extra[name]; again {
				return nil, m // chosen as having wheels everywhere, yet pip found none
			}
			v, leaveOut, err := b.commonVersion(ctx, m, res.Links, constraints, kept, drop)
			if err != nil {
				return nil, err
			}
			for _, out := range leaveOut {
				b.opts.Progressf("leaving CPython %s out: no version of %s up to %s has wheels for it on every platform", out, m.Pin.Name, m.Pin.Version)
			}
			kept = slices.DeleteFunc(kept, func(s string) bool { return slices.Contains(leaveOut, s) })
			if v == "" {
				continue
			}
			b.opts.Progressf("%s has no wheel for %s, CPython %s: installing %s==%s, the newest with wheels for every target, everywhere", m.Pin, m.Platform.Slash(), m.PyVersion, m.Pin.Name, v)
			extra[name] = pin{m.Pin.Name, v}
			repinned[name] = true
		}
		if len(kept) == 0 {
			return nil, missing[0]
		}
		if len(repinned) == 0 {
			b.removeVersions(versions, kept)
			return kept, nil
		}
		if round == maxRounds {
			return nil, fmt.Errorf("the dependencies still have no common wheels for every target after %d resolutions: %w", round, missing[0])
		}
		for _, p := range b.opts.Platforms {
			if err := os.RemoveAll(filepath.Join(b.tmp, p.String())); err != nil {
				return nil, err
			}
		}
		versions = kept
	}
}

// resolve resolves the dependencies once, for the first platform and the first of versions.
// With drop, a version the first platform has no wheels of some dependency for is left out and
// the next one tried.
func (b *build) resolve(ctx context.Context, constraints []string, versions *[]string, drop bool, dir string) (*resolution, error) {
	p := b.opts.Platforms[0]
	for {
		v := (*versions)[0]
		b.opts.Progressf("resolving the dependencies for %s, CPython %s (building those published only as source, if any)", p.Slash(), v)
		res, err := resolve(ctx, b.python, b.wheel, b.project, constraints, p, v, dir)
		if err == nil || !drop || len(*versions) == 1 || ctx.Err() != nil || !b.lacksWheels(ctx, err, p, v) {
			return res, err
		}
		b.opts.Progressf("leaving CPython %s out: %s", v, lacking(err, p))
		*versions = (*versions)[1:]
	}
}

// lacksWheels reports whether pip failed for want of a wheel for the target, not for a conflict
// between versions: pip's resolver reports both as ResolutionImpossible, and a conflict counts
// as lacking only when it is an author's pin that has no wheel.
func (b *build) lacksWheels(ctx context.Context, err error, p manifest.Platform, pyVersion string) bool {
	if !noWheels(err) {
		return false
	}
	if !strings.Contains(err.Error(), "ResolutionImpossible") {
		return true
	}
	tags, terr := pipPlatforms(p)
	if terr != nil || b.author == "" {
		return false
	}
	name, _ := authorPinFor(ctx, b.python, b.author, normalizeName(unmetName(err)), tags, pyVersion)
	return name != ""
}

// lacking says what a target lacks, from pip's error: the distribution it names when it names one.
func lacking(err error, p manifest.Platform) string {
	if name := unmetName(err); name != "" {
		return fmt.Sprintf("no wheel of %s fits it on %s", name, p.Slash())
	}
	return fmt.Sprintf("not every dependency has wheels for it on %s", p.Slash())
}

// removeVersions removes the installs of the versions not kept.
func (b *build) removeVersions(versions, kept []string) {
	for _, v := range versions {
		if !slices.Contains(kept, v) {
			for _, p := range b.opts.Platforms {
				os.RemoveAll(filepath.Join(b.tmp, p.String(), "lib", cpTag(v)))
			}
		}
	}
}

// installRound runs pip for every platform and CPython version, two at a time, under the
// resolution res (and the extra constraints files). It gives the versions not left out (with
// drop, a version some platform has no wheels of some dependency for is), and the installs that
// failed for want of a wheel of a resolved version: their versions are among those given, and
// the caller decides what becomes of them.
func (b *build) installRound(ctx context.Context, res *resolution, extra, versions []string, drop bool) ([]string, []*missingWheel, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		p manifest.Platform
		v string
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	var missing []*missingWheel
	dropped := map[string]dropReason{} // version -> why a platform could not have it
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				mu.Lock()
				skip := dropped[j.v].err != nil
				mu.Unlock()
				if skip {
					continue
				}
				step := fmt.Sprintf("installing dependencies for %s, CPython %s", j.p.Slash(), j.v)
				b.opts.StepStart(step)
				target := filepath.Join(b.tmp, j.p.String(), "lib", cpTag(j.v))
				err := installForTarget(ctx, b.python, b.wheel, target, b.author, res, extra, j.p, j.v)
				b.opts.StepDone(step, err)
				if err == nil {
					continue
				}
				mu.Lock()
				var mw *missingWheel
				switch {
				case errors.As(err, &mw):
					missing = append(missing, mw)
				case drop && ctx.Err() == nil && noWheels(err):
					if dropped[j.v].err == nil {
						dropped[j.v] = dropReason{err, j.p}
					}
				case first == nil:
					first = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, v := range versions {
		for _, p := range b.opts.Platforms {
			select {
			case jobs <- job{p, v}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return nil, nil, first
	}
	kept, err := b.keptVersions(versions, dropped)
	if err != nil {
		return nil, nil, err
	}
	sortMissing(missing)
	return kept, missing, nil
}

// dropReason is why a CPython version is left out: a platform could not have it.
type dropReason struct {
	err error
	p   manifest.Platform
}

// keptVersions is versions without those dropped (each said once); when none is left, the first
// one's reason is the error.
func (b *build) keptVersions(versions []string, dropped map[string]dropReason) ([]string, error) {
	var kept []string
	for _, v := range versions {
		if d := dropped[v]; d.err != nil {
			b.opts.Progressf("leaving CPython %s out: %s", v, lacking(d.err, d.p))
			continue
		}
		kept = append(kept, v)
	}
	if len(kept) == 0 {
		return nil, dropped[versions[0]].err
	}
	return kept, nil
}

// sortMissing puts the failures in the order of the targets, so that what is said is the same
// every run.
func sortMissing(missing []*missingWheel) {
	sort.Slice(missing, func(i, j int) bool {
		a, c := missing[i], missing[j]
		if a.PyVersion != c.PyVersion {
			return a.PyVersion < c.PyVersion
		}
		return a.Platform.String() < c.Platform.String()
	})
}

// commonVersion finds the newest version of m's distribution, no newer than the one the
// resolution chose and within the constraints files, that has a wheel for every platform and
// each of versions, and gives it ("" when no version is needed: every version lacking one is
// left out). A CPython version some platform has no wheel of any such version for is given in
// leaveOut when drop allows it; without drop, that is an error naming the package, version and
// platform. When m's own target has a wheel of the chosen version after all, the failure was a
// conflict, not a missing wheel, and m's error is given.
func (b *build) commonVersion(ctx context.Context, m *missingWheel, links string, constraints, versions []string, drop bool) (best string, leaveOut []string, err error) {
	// m's own target first: most often it has no version at all (a CPython version too new for
	// a compiled dependency), which settles it without asking every target.
	own, err := newestWheel(ctx, b.python, m.Pin.Name, m.Pin.Version, links, constraints, m.Platform, m.PyVersion)
	switch {
	case err != nil:
		return "", nil, err
	case own == m.Pin.Version:
		return "", nil, m.err // it has that wheel: pip failed for another reason
	case own == "" && drop && len(versions) > 1:
		return "", []string{m.PyVersion}, nil
	case own == "":
		return "", nil, fmt.Errorf("%s, which the dependencies resolve to, has no wheel for %s, CPython %s, nor has any older version of %s (pin %s to a version with wheels for every platform, or leave %s out with --platform)", m.Pin, m.Platform, m.PyVersion, m.Pin.Name, m.Pin.Name, m.Platform)
	}
	best = own
	for pass := 0; ; pass++ {
		lowered := false
		for _, v := range versions {
			for _, p := range b.opts.Platforms {
				if slices.Contains(leaveOut, v) {
					break
				}
				got, err := newestWheel(ctx, b.python, m.Pin.Name, best, links, constraints, p, v)
				switch {
				case err != nil:
					return "", nil, err
				case got == "" && drop:
					leaveOut = append(leaveOut, v)
				case got == "":
					return "", nil, fmt.Errorf("%s, which the dependencies resolve to, has no wheel for %s, CPython %s, nor has any older version of %s that every other target has (pin %s to a version with wheels for every platform, or leave %s out with --platform)", m.Pin, p, v, m.Pin.Name, m.Pin.Name, p)
				case got != best:
					best, lowered = got, true
				}
			}
		}
		switch {
		case len(leaveOut) == len(versions):
			return "", nil, m
		case !lowered:
			return best, leaveOut, nil
		case pass == 5:
			return "", nil, fmt.Errorf("%s has no wheel for %s, CPython %s, and no common older version of %s was settled on in %d passes over the targets (pin one with wheels for every target)", m.Pin, m.Platform, m.PyVersion, m.Pin.Name, pass+1)
		}
	}
}

// noWheels reports whether a failed install failed for want of a distribution that fits the
// target (pip's resolver messages, or a pin with no wheel), not for some other reason.
func noWheels(err error) bool {
	msg := err.Error()
	for _, s := range []string{"No matching distribution found", "Could not find a version that satisfies", "ResolutionImpossible", "has no wheel for", "requires a different Python"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// admittedVersions gives those of versions that the project's requires-python admits, or an
// error when it admits none.
func admittedVersions(proj *PyProject, versions []string) ([]string, error) {
	var out []string
	for _, v := range versions {
		var minor int
		fmt.Sscanf(v, "3.%d", &minor)
		ok, err := allowsMinor(proj.RequiresPython, minor)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(proj.Dir, "pyproject.toml"), err)
		}
		if ok {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: requires-python %q admits none of CPython %s", filepath.Join(proj.Dir, "pyproject.toml"), proj.RequiresPython, strings.Join(versions, ", "))
	}
	return out, nil
}

// checkVersions checks claimed CPython versions ("3.12"), sorts them and drops repeats; none
// gives PythonVersions.
func checkVersions(vs []string) ([]string, error) {
	if len(vs) == 0 {
		return PythonVersions, nil
	}
	seen := map[int]bool{}
	var minors []int
	for _, v := range vs {
		var minor int
		if _, err := fmt.Sscanf(v, "3.%d", &minor); err != nil || fmt.Sprintf("3.%d", minor) != v {
			return nil, fmt.Errorf("--python-versions: %q is not a CPython version such as 3.12", v)
		}
		if minor < 11 {
			return nil, fmt.Errorf("--python-versions: %s is older than 3.11, which the tf SDK needs", v)
		}
		if !seen[minor] {
			seen[minor] = true
			minors = append(minors, minor)
		}
	}
	sort.Ints(minors)
	out := make([]string, len(minors))
	for i, m := range minors {
		out[i] = fmt.Sprintf("3.%d", m)
	}
	return out, nil
}
