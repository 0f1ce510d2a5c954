package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/internal/progress"
	"github.com/oprov/oprov/pkg/gobuild"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/pybuild"
	"github.com/oprov/oprov/pkg/stdiohost"
)

type packageOptions struct {
	io         *IOStreams
	GoDir      string
	BinDir     string
	PyDir      string
	StdioDir   string
	ModuleDir  string
	PyVersions []string
	PyPins     string
	Version    string
	Name       string
	Platforms  []string
	OutDir     string
	output     outputFlag
}

func newPackageCmd(ios *IOStreams) *cobra.Command {
	o := &packageOptions{io: ios}
	c := &cobra.Command{
		Use:   "package (--go DIR | --python DIR | --stdio DIR | --bin DIR | --module DIR) --version VERSION [--out-dir DIST]",
		Short: "Build a provider's release zips and SHA256SUMS",
		Long: `Build release packages: terraform-provider-TYPE_VERSION_OS_ARCH.zip per platform, and
terraform-provider-TYPE_VERSION_SHA256SUMS. The zips are deterministic (sorted entries, fixed
times: SOURCE_DATE_EPOCH when set), so the same input gives the same digests.

From Go source (--go DIR), each platform is cross-compiled with CGO_ENABLED=0 -trimpath
(default platforms: darwin, linux and windows on amd64 and arm64). The provider type comes from
the directory or module name terraform-provider-TYPE, or from --name.

From a Python project (--python DIR: a pyproject.toml whose console script
terraform-provider-TYPE calls the provider), each zip holds a launcher script as the executable
and the project with its dependencies, installed by pip for that platform, once per supported
CPython version (--python-versions; lib/cpXY, with what is identical for every version stored
once in lib/common, and the large compiled extensions of all but the newest version stored as
deltas the launcher rebuilds into the user's cache); the launcher picks the set matching the
target's python3. The dependencies are resolved once, under the author's pins (--python-pins,
else the first of pylock.toml, pylock.NAME.toml, constraints.txt, requirements.txt), and every
platform and version gets the same versions. Default platforms: darwin and linux on amd64 and
arm64; windows is refused.

From a stdio provider (--stdio DIR: a directory with oprov-provider.json, see
` + docPage + `stdio-protocol.md), each zip holds the directory's files and, as the executable, a small sh
launcher that runs 'oprov __stdio-host' on that directory: the machine that runs the provider
needs oprov on PATH (or $OPROV) and the provider's own interpreter. Default platforms: darwin
and linux on amd64 and arm64.

From built executables (--bin DIR), DIR holds one directory per platform named OS_ARCH, each with
the executable (named terraform-provider-*, or the only file there) and any extra files:

    bin/linux_amd64/terraform-provider-hello
    bin/windows_amd64/terraform-provider-hello.exe

From a module directory (--module DIR), the zip OpenTofu's module package holds as its one layer:
the module's files, subdirectories kept, with .terraform, .git and every other dot-entry left
out, sorted, at one fixed time (not SOURCE_DATE_EPOCH: a module's zh: hash must come out the same
wherever its tree is zipped again). It is written as --out-dir/NAME_VERSION.zip (NAME: --name or
the directory's name), with its h1: and zh: hashes and the manifest digest 'oprov push --module'
will give it. --version is optional here.`,
		Example: `  oprov package --go ./examples/hello --version 1.0.0 --out-dir dist
  oprov package --stdio ./kv --version 0.1.0
  oprov package --bin ./bin --name hello --version 1.0.0 --platform linux_amd64 -o json
  oprov package --module ./modules/network --version 1.2.0 -o json`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runPackage(c.Context(), o) },
	}
	f := c.Flags()
	f.StringVar(&o.GoDir, "go", "", "directory of the provider's Go module, cross-compiled per platform with CGO_ENABLED=0 -trimpath and -X main.version=VERSION")
	f.StringVar(&o.BinDir, "bin", "", "directory of built executables, laid out as DIR/OS_ARCH/ (the file named terraform-provider-* in each, or its only file; other files go beside it in the zip)")
	f.StringVar(&o.PyDir, "python", "", "directory of a Python project (pyproject.toml with a console script terraform-provider-TYPE)")
	f.StringVar(&o.StdioDir, "stdio", "", "directory of a stdio provider (oprov-provider.json)")
	f.StringVar(&o.ModuleDir, "module", "", "directory of a module: writes its deterministic zip (OpenTofu's module package layer) as --out-dir/NAME_VERSION.zip; dot-entries (.terraform, .git) left out")
	f.StringSliceVar(&o.PyVersions, "python-versions", nil, "with --python: the CPython versions the zips claim, such as 3.12,3.13 (default: those of "+strings.Join(pybuild.PythonVersions, ",")+" that requires-python admits and every dependency has wheels for)")
	f.StringVar(&o.PyPins, "python-pins", "", "with --python: the author's pins file, a PEP 751 pylock.toml or pylock.NAME.toml, or a requirements or constraints file (default: the first of pylock.toml, pylock.NAME.toml, constraints.txt, requirements.txt beside pyproject.toml)")
	f.StringVar(&o.Version, "version", "", "the release's version, semver without a leading v, such as 1.2.0 (required)")
	f.StringVar(&o.Name, "name", "", "provider type (default: from the directory or module name terraform-provider-TYPE)")
	f.StringSliceVar(&o.Platforms, "platform", nil, "platforms to build, OS_ARCH or OS/ARCH, repeatable or comma-separated (default for --go: darwin, linux and windows on amd64 and arm64; for --python: linux and darwin on amd64 and arm64)")
	f.StringVar(&o.OutDir, "out-dir", "dist", "directory to write the release into")
	o.output.register(c)
	o.output.pathHint = "--out-dir"
	return c
}

func runPackage(ctx context.Context, o *packageOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if o.ModuleDir != "" {
		return runPackageModule(o)
	}
	if n := countSet(o.GoDir, o.BinDir, o.PyDir, o.StdioDir); n != 1 {
		return usageErrorf("give exactly one of --go DIR, --python DIR, --stdio DIR and --bin DIR")
	}
	if o.Version == "" {
		return usageErrorf("--version is required (or package a module with --module DIR)")
	}
	if o.PyDir == "" && (len(o.PyVersions) > 0 || o.PyPins != "") {
		return usageErrorf("--python-versions and --python-pins go with --python DIR")
	}
	platforms, err := parsePlatforms(o.Platforms)
	if err != nil {
		return err
	}
	// Each platform's build is shown as it starts and ends (a line each when stderr is no
	// terminal); other notes on a terminal only.
	total := len(platforms)
	if o.GoDir != "" && total == 0 {
		total = len(gobuild.DefaultPlatforms)
	} else if o.PyDir != "" {
		total = 0 // platforms times CPython versions, known only once resolved
	}
	steps := progress.NewSteps(o.io.ErrOut, o.io.ErrTTY, total)
	opts := providerrelease.PackageOptions{
		Version: o.Version, Type: o.Name, Platforms: platforms, OutDir: o.OutDir, Steps: steps,
		Progress: func(format string, args ...any) {
			if o.io.ErrTTY {
				steps.Note(fmt.Sprintf(format, args...))
			}
		},
	}
	var p *providerrelease.Packaged
	switch {
	case o.GoDir != "":
		p, err = gobuild.Package(ctx, o.GoDir, opts)
	case o.PyDir != "":
		p, err = pybuild.Package(ctx, o.PyDir, opts, pybuild.Options{Versions: o.PyVersions, Pins: o.PyPins})
	case o.StdioDir != "":
		p, err = stdiohost.Package(o.StdioDir, opts)
	default:
		p, err = providerrelease.PackageBinaries(o.BinDir, opts)
	}
	steps.Finish()
	if err != nil {
		return fmt.Errorf("package: %w", err)
	}
	type pkgJSON struct {
		Platform string `json:"platform"`
		Path     string `json:"path"`
		Size     int64  `json:"size"`
		ZH       string `json:"zh"`
		H1       string `json:"h1"`
	}
	out := struct {
		Type      string    `json:"type"`
		Version   string    `json:"version"`
		SHA256SUM string    `json:"sha256sums"`
		Packages  []pkgJSON `json:"packages"`
	}{Type: p.Release.Type, Version: p.Release.Version, SHA256SUM: p.Release.SumsPath}
	for _, a := range p.Release.Artifacts {
		h := p.Hashes[a.Name.Platform]
		out.Packages = append(out.Packages, pkgJSON{a.Name.Platform.String(), a.Path, a.Size, h.ZH, h.H1})
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, out)
	}
	fmt.Fprintf(o.io.Out, "Packaged %s %s for %s into %s\n", out.Type, out.Version, plural(len(out.Packages), "platform"), o.OutDir)
	for _, pk := range out.Packages {
		fmt.Fprintf(o.io.Out, "  %-14s %s\n  %-14s %s\n", pk.Platform, pk.H1, "", pk.ZH)
	}
	fmt.Fprintf(o.io.Out, "Checksums: %s\n", out.SHA256SUM)
	return nil
}

// countSet counts the non-empty strings.
func countSet(s ...string) int {
	n := 0
	for _, v := range s {
		if v != "" {
			n++
		}
	}
	return n
}
