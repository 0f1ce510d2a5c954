package release

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/oprov/oprov/manifest"
)

// PackagePython packages the Python project in dir (a pyproject.toml whose console script
// terraform-provider-TYPE calls the provider) for each platform: the launcher as the executable,
// and lib/cpXY/ with the project and its dependencies installed by pip for that platform, for
// every CPython version in PythonVersions. The zips are deterministic like every other.
func PackagePython(ctx context.Context, dir string, opts PackageOptions) (*Packaged, error) {
	proj, err := ReadPyProject(dir)
	if err != nil {
		return nil, err
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
		opts.Platforms = DefaultPythonPlatforms
	}
	for _, p := range opts.Platforms {
		if _, err := pipPlatforms(p); err != nil {
			return nil, err
		}
	}
	if err := opts.check(); err != nil {
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
	opts.progress("building a wheel of %s", dir)
	wheel, err := BuildWheel(ctx, python, dir, filepath.Join(tmp, "wheel"))
	if err != nil {
		return nil, err
	}
	if err := installAll(ctx, python, wheel, tmp, opts); err != nil {
		return nil, err
	}
	launcher := filepath.Join(tmp, "launcher")
	script := providerPrefix + opts.Type
	if err := os.WriteFile(launcher, []byte(PythonLauncher(script, entry, PythonVersions)), 0o755); err != nil {
		return nil, err
	}
	var files []platformFiles
	for _, p := range opts.Platforms {
		files = append(files, platformFiles{platform: p, exe: launcher, tree: filepath.Join(tmp, p.String())})
	}
	return writeRelease(opts, files)
}

// installAll runs pip for every platform and CPython version, two at a time.
func installAll(ctx context.Context, python, wheel, tmp string, opts PackageOptions) error {
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
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				opts.progress("installing dependencies for %s, CPython %s", j.p.Slash(), j.v)
				target := filepath.Join(tmp, j.p.String(), "lib", cpTag(j.v))
				if err := InstallForTarget(ctx, python, wheel, target, j.p, j.v); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for _, p := range opts.Platforms {
		for _, v := range PythonVersions {
			select {
			case jobs <- job{p, v}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	return first
}

// treeFiles lists a directory's regular files as zip entries (mode 0644) named by their path
// below root.
func treeFiles(root string) ([]ZipFile, error) {
	var out []ZipFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (only files go into a package)", p)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		// Modes are not carried: Python needs none, and umasks differ between machines.
		out = append(out, ZipFile{Name: filepath.ToSlash(rel), Open: func() (io.ReadCloser, error) { return os.Open(p) }})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("packaging %s: %w", root, err)
	}
	return out, nil
}
