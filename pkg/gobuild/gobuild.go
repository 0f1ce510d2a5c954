// Package gobuild builds providers from Go source the way releases are built (CGO_ENABLED=0,
// -trimpath, no VCS stamping) and packages them as a release.
package gobuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// DefaultPlatforms are the platforms `oprov package --go` builds when none are named.
var DefaultPlatforms = []manifest.Platform{
	{OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"},
	{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"},
	{OS: "windows", Arch: "amd64"}, {OS: "windows", Arch: "arm64"},
}

// Package cross-compiles the Go provider in dir for each platform (CGO_ENABLED=0, -trimpath)
// and writes its release zips and SHA256SUMS into opts.OutDir.
func Package(ctx context.Context, dir string, opts providerrelease.PackageOptions) (*providerrelease.Packaged, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, errors.New("the go toolchain is not on PATH: install Go, or build the executables yourself and use --bin")
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("%s is not a Go module (no go.mod): %w", dir, errors.Unwrap(err))
	}
	if opts.Type == "" {
		abs, _ := filepath.Abs(dir)
		if t, ok := providerrelease.TypeFromName(filepath.Base(abs)); ok {
			opts.Type = t
		} else if t, ok := providerrelease.TypeFromName(modfile.ModulePath(gomod)); ok {
			opts.Type = t
		} else {
			return nil, fmt.Errorf("cannot tell the provider type: neither the directory %q nor the module %q is named terraform-provider-TYPE (pass --name TYPE)", filepath.Base(abs), modfile.ModulePath(gomod))
		}
	}
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms
	}
	if err := opts.Check(); err != nil {
		return nil, err
	}
	work, err := scratch.Beside(os.TempDir())
	if err != nil {
		return nil, err
	}
	defer work.Release()
	tmp := work.Path

	var files []providerrelease.PlatformFiles
	for _, p := range opts.Platforms {
		exe := filepath.Join(tmp, p.String(), providerrelease.ExecutableName(opts.Type, opts.Version, p.OS))
		step := fmt.Sprintf("building %s for %s", opts.Type, p.Slash())
		opts.StepStart(step)
		err := Build(ctx, dir, p, opts.Version, exe)
		opts.StepDone(step, err)
		if err != nil {
			if opts.BuildOutput != nil {
				io.WriteString(opts.BuildOutput, err.Error())
			}
			return nil, err
		}
		files = append(files, providerrelease.PlatformFiles{Platform: p, Exe: exe})
	}
	return providerrelease.Write(opts, files)
}

// Build cross-compiles the Go module in dir for one platform into out, the way releases are
// built: CGO_ENABLED=0, -trimpath, no VCS stamping, and -X main.version=VERSION.
func Build(ctx context.Context, dir string, p manifest.Platform, version, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version="+version, "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOFLAGS=")
	var buf strings.Builder
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s for %s failed: %v\n%s", dir, p.Slash(), err, strings.TrimSpace(buf.String()))
	}
	return nil
}
