package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// installBuild is Install for a package made on this machine: the build directory builds/KEY
// holding the executable, made unless the cache has it. Make fills a temporary directory, which
// is sealed and renamed into place once complete, under a lock so that concurrent runs make it
// once.
func (c *Cache) installBuild(ctx context.Context, pkg *Package) (*Installed, error) {
	b := pkg.Build
	if b.Key == "" || b.Name == "" || filepath.Base(b.Name) != b.Name {
		return nil, fmt.Errorf("%s: a build needs a key and an executable name (got %q, %q)", pkg.name(), b.Key, b.Name)
	}
	dir := c.buildDir(b.Key)
	in := &Installed{Root: dir, Dir: dir, Executable: filepath.Join(dir, b.Name)}
	// The directories down to the build, and its executable, must be this user's alone; what a
	// build holds besides (a Python environment) is not walked on every launch.
	if err := c.checkPrivate(filepath.Dir(dir), false); err != nil {
		return nil, fmt.Errorf("provider %s: %w", pkg.Addr, err)
	}
	if isFile(in.Executable) {
		if err := c.checkPrivate(dir, false); err != nil {
			return nil, fmt.Errorf("provider %s: %w", pkg.Addr, err)
		}
		if err := checkOwn(in.Executable, c.Dir, false); err != nil {
			return nil, fmt.Errorf("provider %s: %w", pkg.Addr, err)
		}
		c.markUsed(dir)
		return in, nil
	}
	unlock, err := c.lock(ctx, "build-"+b.Key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if isFile(in.Executable) { // another process made it while this one waited
		return in, nil
	}
	tmpRoot, err := c.TmpDir()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(tmpRoot, "build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := b.Make(ctx, tmp); err != nil {
		return nil, fmt.Errorf("provider %s: %w", pkg.Addr, err)
	}
	if !isFile(filepath.Join(tmp, b.Name)) {
		return nil, fmt.Errorf("provider %s: the build made no %s", pkg.Addr, b.Name)
	}
	if err := sealDir(tmp); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	in.Built = true
	return in, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
