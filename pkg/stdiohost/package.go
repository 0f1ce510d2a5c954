package stdiohost

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// defaultPlatforms are the platforms a stdio provider is packaged for: those where its sh
// launcher runs.
var defaultPlatforms = []manifest.Platform{{OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}, {OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}}

// Package writes release zips of the stdio provider in dir: each holds the directory's files
// (hidden ones and __pycache__ left out) and, as the executable, a small sh launcher that hands
// over to the oprov on PATH (`oprov __stdio-host DIR`). The provider's files are the same for
// every platform; the zips differ only in name.
func Package(dir string, opts providerrelease.PackageOptions) (*providerrelease.Packaged, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if opts.Type != "" && opts.Type != m.Type {
		return nil, fmt.Errorf("--name %s disagrees with %s, which says %q", opts.Type, filepath.Join(dir, ManifestName), m.Type)
	}
	opts.Type = m.Type
	if len(opts.Platforms) == 0 {
		opts.Platforms = defaultPlatforms
	}
	for _, p := range opts.Platforms {
		if p.OS == "windows" {
			return nil, errors.New("a stdio provider's launcher is an sh script: windows is not supported")
		}
	}
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(opts.OutDir, ".stdio-package-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	if err := copyTree(dir, tree); err != nil {
		return nil, err
	}
	launcherPath := filepath.Join(tmp, "launcher")
	if err := os.WriteFile(launcherPath, []byte(Launcher(m.Type, opts.Version)), 0o755); err != nil {
		return nil, err
	}
	var files []providerrelease.PlatformFiles
	for _, p := range opts.Platforms {
		files = append(files, providerrelease.PlatformFiles{Platform: p, Exe: launcherPath, Tree: tree})
	}
	return providerrelease.Write(opts, files)
}

// Launcher is the executable of a packaged stdio provider: it execs the oprov found on PATH
// (or $OPROV) as the host of the directory it is in, and says what to do when there is none
// (on stdout as well, where tofu and Terraform quote it: "Unrecognized remote plugin message").
func Launcher(typ, version string) string {
	name := providerrelease.ProviderPrefix + typ
	return `#!/bin/sh
# ` + name + ` ` + version + `: a stdio provider (oprov's docs/stdio-protocol.md). oprov hosts it:
# this script hands over to the oprov on PATH, or to $OPROV.
dir=$(cd "$(dirname "$0")" && pwd) || exit 1
oprov=${OPROV:-oprov}
if ! command -v "$oprov" >/dev/null 2>&1; then
  # On stdout too: tofu quotes what a plugin printed instead of its handshake.
  msg="` + name + `: this provider runs under oprov, and no '$oprov' is on PATH. Install oprov and put it on PATH (or set OPROV to its path), then run tofu again."
  echo "$msg" >&2
  echo "$msg"
  exit 1
fi
exec "$oprov" __stdio-host "$dir"
`
}

// IsLauncher reports whether data is, byte for byte, the launcher Package writes for a provider
// of type typ (of some version): a program whose behaviour oprov knows, since it wrote it. Only
// then does a sandbox let it run what the launcher runs (sh, dirname, oprov).
func IsLauncher(data []byte, typ string) bool {
	head := "#!/bin/sh\n# " + providerrelease.ProviderPrefix + typ + " "
	rest, ok := strings.CutPrefix(string(data), head)
	if !ok {
		return false
	}
	version, _, ok := strings.Cut(rest, ": a stdio provider (")
	return ok && !strings.ContainsAny(version, "\n'`$\\") && string(data) == Launcher(typ, version)
}

// copyTree copies a provider directory's regular files, leaving out hidden names and
// __pycache__.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if p != src && (strings.HasPrefix(d.Name(), ".") || d.Name() == "__pycache__") {
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
			return fmt.Errorf("%s is not a regular file (only files go into a package)", p)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
