// Package loader gets the providers a configuration declares from OCI registries and hands them
// to OpenTofu or Terraform: it reads oprov.hcl beside the .tf files, resolves each managed
// provider's constraints against its repository's tags and pins them in .terraform.lock.hcl,
// verifies signatures under a trust policy, caches zips by content address, unpacks them safely
// into a filesystem mirror, and writes the CLI configuration that installs from there.
package loader

import (
	"context"
	"errors"
	"fmt"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/source"
)

// Installed is one provider made ready for OpenTofu.
type Installed struct {
	Addr       string               `json:"address"`
	Version    string               `json:"version"`
	Platform   string               `json:"platform"`
	Zip        string               `json:"zip_digest"`
	MirrorRoot string               `json:"mirror"`
	Dir        string               `json:"-"` // the package's own directory under MirrorRoot
	Executable string               `json:"executable"`
	FromCache  bool                 `json:"from_cache"` // nothing was downloaded for it
	Auth       cache.Authentication `json:"authentication"`

	entry *cache.Installed // the cache's entry, as checked in this call (for launching)
}

// InstallResult is what Install did.
type InstallResult struct {
	Installed []Installed  `json:"installed"`
	Locked    []LockChange `json:"locked,omitempty"`
	Unmanaged []string     `json:"unmanaged,omitempty"`
	// Modules are the remote modules installed into .terraform/modules.
	Modules []ModuleChange `json:"modules,omitempty"`
	Sources []string       `json:"kept_as_source,omitempty"` // launched only by oprov run
	Network bool           `json:"network"`
	// CredentialFiles are the docker-style credential files the CLI configuration points OpenTofu
	// at: those oprov read that OpenTofu would not find on its own.
	CredentialFiles []string `json:"credential_files,omitempty"`
}

// Install makes every managed provider ready: it locks those the lock file lacks (or whose
// constraints the locked version no longer meets), asks each provider's source for this machine's
// package (verified per the policy), checks it against the lock, fetches its zip into the cache,
// and unpacks it into the cache's filesystem mirror. With a warm cache and a complete lock it
// makes no network request. Nothing is unpacked for a provider whose zip disagrees with the lock.
//
// Remote modules are resolved first, each checked against the module lock (those it lacks are
// locked), and installed into .terraform/modules (with modules.json, so that tofu init keeps
// them) once every provider is ready: a module or provider refused leaves nothing installed.
func (p *Project) Install(ctx context.Context, opts Options) (*InstallResult, error) {
	tree, mods, err := p.resolveModules(ctx, &opts, false, false)
	if err != nil {
		return nil, err
	}
	s := p.session(&opts)
	res := &InstallResult{CredentialFiles: oci.TofuCredentialFiles(opts.Registry.RegistryConfig)}
	for _, r := range p.Unmanaged {
		res.Unmanaged = append(res.Unmanaged, r.Addr.String())
	}
	for _, pv := range p.Local {
		res.Sources = append(res.Sources, pv.Addr())
	}
	lockedNow := map[string]bool{}
	for _, pv := range p.Managed {
		if p.lockCovers(pv) {
			continue
		}
		c, err := p.lockOne(ctx, s, pv)
		if err != nil {
			return nil, err
		}
		res.Locked = append(res.Locked, *c)
		lockedNow[pv.Addr()] = true
	}
	// Check every provider against the lock before anything is unpacked.
	pkgs := make([]*cache.Package, len(p.Managed))
	for i, pv := range p.Managed {
		pkg, err := p.lockedPackage(ctx, s, pv)
		if err != nil {
			return nil, err
		}
		pkgs[i] = pkg
	}
	for _, pkg := range pkgs {
		in, err := s.opts.install(ctx, pkg, p.Lock.Entries[pkg.Addr.String()])
		if err != nil {
			return nil, err
		}
		in.FromCache = in.FromCache && !lockedNow[in.Addr] // locking it just now went to the registry
		res.Installed = append(res.Installed, *in)
	}
	if err := p.installModules(ctx, tree, mods); err != nil {
		return nil, err
	}
	res.Modules = mods
	if err := p.Lock.Write(); err != nil {
		return nil, err
	}
	if err := p.Modules.Write(); err != nil {
		return nil, err
	}
	res.Network = s.env.Network.Load()
	for _, m := range mods {
		res.Network = res.Network || !m.FromInstalled
	}
	return res, nil
}

// lockCovers reports whether the lock pins a version of pv that meets its constraints, with hashes.
func (p *Project) lockCovers(pv *Provider) bool {
	e := p.Lock.Entries[pv.Addr()]
	if e == nil || len(e.Hashes) == 0 {
		return false
	}
	set, err := allowed(pv.Req)
	if err != nil {
		return false
	}
	v, err := manifest.ParseVersion(e.Version)
	return err == nil && set.Has(v)
}

// lockedPackage asks pv's source for this machine's package of the locked version and checks it
// against the lock. An answer from cached metadata that disagrees is asked again of the origin.
func (p *Project) lockedPackage(ctx context.Context, s *session, pv *Provider) (*cache.Package, error) {
	e := p.Lock.Entries[pv.Addr()]
	v, err := manifest.ParseVersion(e.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", p.Lock.Path, pv.Addr(), err)
	}
	src := s.multi()
	pkg, err := src.PackageFor(ctx, pv.Req.Addr, v, s.opts.host())
	if err == nil {
		if err = checkAgainstLock(e, pkg); err != nil && pkg.FromCache && errors.Is(err, ErrLockMismatch) {
			pkg, err = src.PackageFor(source.WithoutCache(ctx), pv.Req.Addr, v, s.opts.host())
			if err == nil {
				err = checkAgainstLock(e, pkg)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return pkg, nil
}

// install puts one package into the cache through its one door (cache.Install: fetched by
// digest, unpacked safely, its files hashed and checked in this call against the lock, the
// source's statement or the verified zip) and gives it ready for OpenTofu. e is the lock entry
// that judges it, or nil.
func (o *Options) install(ctx context.Context, pkg *cache.Package, e *config.LockEntry) (*Installed, error) {
	entry, err := o.Cache.Install(ctx, pkg, lockJudge(e, pkg), o.Progress)
	if err != nil {
		return nil, err
	}
	pkg.Learn(entry.H1)
	return &Installed{
		Addr: pkg.Addr.String(), Version: pkg.Version, Platform: pkg.Platform.String(), Zip: pkg.Zip.String(),
		MirrorRoot: entry.Root, Dir: entry.Dir, Executable: entry.Executable,
		Auth: pkg.Auth, FromCache: pkg.FromCache && !entry.Fetched, entry: entry,
	}, nil
}

// lockJudge judges a package's h1: by a lock entry: one the lock records is vouched for, one it
// does not is refused. A lock with no h1: hashes (or no entry) has nothing to say.
func lockJudge(e *config.LockEntry, pkg *cache.Package) cache.Judge {
	return func(h1 string) (bool, error) {
		if e == nil || !e.HasScheme("h1:") {
			return false, nil
		}
		if !e.Has(h1) {
			return false, fmt.Errorf("%s %s: the %s package's %s %w, so nothing was installed", pkg.Addr, e.Version, pkg.Platform, h1, ErrLockMismatch)
		}
		return true, nil
	}
}
