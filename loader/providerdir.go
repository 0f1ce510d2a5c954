package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// providerDir is OpenTofu's (and Terraform's) per-configuration provider directory,
// DATA_DIR/providers/HOST/NAMESPACE/TYPE/VERSION/OS_ARCH, where DATA_DIR is TF_DATA_DIR (relative
// to the configuration) or .terraform.
func (p *Project) providerDir() string {
	data := os.Getenv("TF_DATA_DIR")
	if data == "" {
		data = ".terraform"
	}
	if !filepath.IsAbs(data) {
		data = filepath.Join(p.Dir, data)
	}
	return filepath.Join(data, "providers")
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
	for _, in := range res.Installed {
		if in.Platform != host {
			continue
		}
		rel, err := filepath.Rel(in.MirrorRoot, in.Dir) // HOST/NS/TYPE/VERSION/OS_ARCH, tofu's layout too
		if err == nil {
			err = linkPackage(in.Dir, filepath.Join(p.providerDir(), rel))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", in.Addr, in.Version, err))
		}
	}
	return errs
}

// linkPackage makes link a symlink to target unless it is one already or is a real directory.
func linkPackage(target, link string) error {
	st, err := os.Lstat(link)
	switch {
	case err == nil && st.Mode()&fs.ModeSymlink == 0:
		return nil // tofu's own copy: tofu checks it against the lock
	case err == nil:
		if old, _ := os.Readlink(link); old == target {
			return nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	// Made beside the link and renamed over it, so the link is never missing or half-made.
	tmp := fmt.Sprintf("%s.oprov-%d", link, os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
