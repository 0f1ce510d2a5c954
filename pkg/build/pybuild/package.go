// Package pybuild builds providers written in Python: it reads a project's pyproject.toml,
// installs it and its dependencies with pip (per platform and CPython version for a release, or
// into a venv for a provider kept as source), and writes the launcher that runs it.
package pybuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/release"
)

// Package packages the Python project in dir (a pyproject.toml whose console script
// terraform-provider-TYPE calls the provider) for each platform: the launcher as the executable,
// and lib/cpXY/ with the project and its dependencies installed by pip for that platform, for
// every CPython version in PythonVersions, less what is identical in all of them, which is
// stored once in lib/common/. The zips are deterministic like every other.
//
// versions are the CPython minor versions claimed, each 3.11 or later. When none are given, the
// claim is every version of PythonVersions that the project's requires-python admits and for
// which pip finds wheels of every dependency on every platform.
func Package(ctx context.Context, dir string, opts release.PackageOptions, versions []string) (*release.Packaged, error) {
	proj, err := ReadPyProject(dir)
	if err != nil {
		return nil, err
	}
	chosen := len(versions) > 0
	if versions, err = checkVersions(versions); err != nil {
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
		opts.Platforms = DefaultPlatforms
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
	opts.Progressf("building a wheel of %s", dir)
	wheel, err := BuildWheel(ctx, python, dir, filepath.Join(tmp, "wheel"))
	if err != nil {
		return nil, err
	}
	pins, err := ProjectPins(dir, proj.Name, filepath.Join(tmp, "pins"))
	if err != nil {
		return nil, err
	}
	opts.Progressf("building the dependencies published only as source, if any")
	links, err := BuildSdists(ctx, python, wheel, pins, filepath.Join(tmp, "sdists"))
	if err != nil {
		return nil, err
	}
	if versions, err = installAll(ctx, python, wheel, tmp, pins, links, opts, versions, !chosen); err != nil {
		return nil, err
	}
	for _, p := range opts.Platforms {
		if err := shareCommon(filepath.Join(tmp, p.String(), "lib"), versions); err != nil {
			return nil, err
		}
	}
	launcher := filepath.Join(tmp, "launcher")
	script := release.ProviderPrefix + opts.Type
	if err := os.WriteFile(launcher, []byte(PythonLauncher(script, entry, versions)), 0o755); err != nil {
		return nil, err
	}
	var files []release.PlatformFiles
	for _, p := range opts.Platforms {
		files = append(files, release.PlatformFiles{Platform: p, Exe: launcher, Tree: filepath.Join(tmp, p.String())})
	}
	return release.Write(opts, files)
}

// installAll runs pip for every platform and CPython version, two at a time, and gives the
// versions installed. With drop, a version for which some platform has no wheel of some
// dependency is left out (and said so) rather than failing, as long as one version remains;
// without, the first failure ends it.
func installAll(ctx context.Context, python, wheel, tmp, pins, links string, opts release.PackageOptions, versions []string, drop bool) ([]string, error) {
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
	missing := map[string]error{} // version -> why a platform could not have it
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				mu.Lock()
				skip := missing[j.v] != nil
				mu.Unlock()
				if skip {
					continue
				}
				opts.Progressf("installing dependencies for %s, CPython %s", j.p.Slash(), j.v)
				target := filepath.Join(tmp, j.p.String(), "lib", cpTag(j.v))
				err := InstallForTarget(ctx, python, wheel, target, pins, links, j.p, j.v)
				if err == nil {
					continue
				}
				mu.Lock()
				if drop && ctx.Err() == nil && noWheels(err) {
					if missing[j.v] == nil {
						missing[j.v] = err
					}
				} else if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, v := range versions {
		for _, p := range opts.Platforms {
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
		return nil, first
	}
	var kept []string
	for _, v := range versions {
		if err := missing[v]; err != nil {
			opts.Progressf("leaving CPython %s out: not every dependency has wheels for it on every platform", v)
			for _, p := range opts.Platforms {
				os.RemoveAll(filepath.Join(tmp, p.String(), "lib", cpTag(v)))
			}
			continue
		}
		kept = append(kept, v)
	}
	if len(kept) == 0 {
		return nil, missing[versions[0]]
	}
	return kept, nil
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
