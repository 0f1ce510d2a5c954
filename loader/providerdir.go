package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/oprov/oprov/internal/iox"
)

// providerDir is OpenTofu's (and Terraform's) per-configuration provider directory,
// DATA_DIR/providers/HOST/NAMESPACE/TYPE/VERSION/OS_ARCH, where DATA_DIR is TF_DATA_DIR (relative
// to the configuration) or .terraform. It gives the directory the configuration's own path is
// taken from (p.Dir, or "" when TF_DATA_DIR names a place outside it) and the provider
// directory's path, relative to that directory when there is one.
func (p *Project) providerDir() (base, rel string) {
	data := os.Getenv("TF_DATA_DIR")
	if data == "" {
		data = ".terraform"
	}
	if filepath.IsLocal(data) {
		return p.Dir, filepath.Join(data, "providers")
	}
	if !filepath.IsAbs(data) {
		data = filepath.Join(p.Dir, data)
	}
	return "", filepath.Join(data, "providers")
}

// LinkProviders places each installed provider for this machine in the configuration's provider
// directory, as a symlink to its unpacked package in the cache: what tofu init itself does when it
// installs from an unpacked filesystem mirror. tofu init then finds the package already
// installed and checks it against the lock's h1: hash once, instead of hashing it once to
// install and again to verify. A package that does not match the lock is one tofu installs
// afresh, so nothing here can make tofu use a package the lock does not allow.
//
// A directory already there (tofu copies when it cannot link) is left to tofu; a symlink to
// another package is replaced in one rename. It returns the providers it could not link, each
// with why: tofu installs those itself, as it would without oprov.
func (p *Project) LinkProviders(res *InstallResult) []error {
	if runtime.GOOS == "windows" {
		return nil // symlinks need privileges there; tofu copies the package itself
	}
	var errs []error
	host := hostPlatform().String()
	var root *os.Root
	for _, in := range res.Installed {
		if in.Platform != host {
			continue
		}
		rel, err := packagePath(in)
		if err == nil && root == nil {
			root, err = openProviderDir(p.providerDir())
		}
		if err == nil {
			err = linkPackage(root, in.Dir, rel)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", in.Addr, in.Version, err))
		}
	}
	if root != nil {
		root.Close()
	}
	return errs
}

// packagePath is where a package goes in the provider directory: its directory relative to its
// mirror root, HOST/NS/TYPE/VERSION/OS_ARCH (tofu's layout too), refused unless it is exactly
// those five names, none of them "." or "..".
func packagePath(in Installed) (string, error) {
	rel, err := filepath.Rel(in.MirrorRoot, in.Dir)
	if err != nil {
		return "", err
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	bad := len(parts) != 5
	for _, part := range parts {
		bad = bad || iox.CheckComponent(part) != nil
	}
	if bad {
		return "", fmt.Errorf("its package directory %s is not HOST/NAMESPACE/TYPE/VERSION/OS_ARCH below its mirror %s: not linked", in.Dir, in.MirrorRoot)
	}
	return rel, nil
}

// openProviderDir makes the provider directory and opens it as the root every link is made
// through: a link planted below it (a HOST directory that leads elsewhere) cannot take the
// links out of it. A provider directory inside the configuration (base set) is reached through
// the configuration's directory: a .terraform that is a link leading out of it (planted by
// whoever wrote the configuration) is refused, rather than followed to fill another place with
// links. One the user's TF_DATA_DIR names outside it is the user's choice, taken by its path.
func openProviderDir(base, rel string) (*os.Root, error) {
	if base == "" {
		if err := os.MkdirAll(rel, 0o755); err != nil {
			return nil, err
		}
		return os.OpenRoot(rel)
	}
	top, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	if err := top.MkdirAll(rel, 0o755); err != nil {
		return nil, fmt.Errorf("making the provider directory %s: %w (a link leading out of the configuration's directory is not followed: remove it, and tofu init makes the directory)", filepath.Join(base, rel), err)
	}
	root, err := top.OpenRoot(rel)
	if err != nil {
		return nil, fmt.Errorf("opening the provider directory %s: %w (a link leading out of the configuration's directory is not followed: remove it, and tofu init makes the directory)", filepath.Join(base, rel), err)
	}
	return root, nil
}

// linkPackage makes rel, below root, a symlink to target unless it is one already or is a real
// directory. Every step goes through root.
func linkPackage(root *os.Root, target, rel string) error {
	st, err := root.Lstat(rel)
	switch {
	case err == nil && st.Mode()&fs.ModeSymlink == 0:
		return nil // tofu's own copy: tofu checks it against the lock
	case err == nil:
		if old, _ := root.Readlink(rel); old == target {
			return nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return linkError(root, rel, err)
	}
	if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return linkError(root, rel, err)
	}
	// Made beside the link and renamed over it, so the link is never missing or half-made.
	tmp := fmt.Sprintf("%s.oprov-%d", rel, os.Getpid())
	root.Remove(tmp)
	if err := root.Symlink(target, tmp); err != nil {
		return linkError(root, rel, err)
	}
	if err := root.Rename(tmp, rel); err != nil {
		root.Remove(tmp)
		return linkError(root, rel, err)
	}
	return nil
}

// linkError says which link could not be made, and why.
func linkError(root *os.Root, rel string, err error) error {
	return fmt.Errorf("linking %s: %w", filepath.Join(root.Name(), rel), err)
}
