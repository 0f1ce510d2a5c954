package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/source"
)

// Options tune locking and installing.
type Options struct {
	Cache *cache.Cache
	// Registry is the one registry client (nil: the defaults).
	Registry *oci.Client
	// Platforms lists the platforms to lock; empty means every platform a version publishes.
	Platforms []manifest.Platform
	// Upgrade re-resolves constraints even where the lock pins a version that meets them.
	Upgrade bool
	// Log receives warnings (policy mode warn) and notes.
	Log io.Writer
	// Progress hears about downloads.
	Progress oci.Progress
	// Host is the platform to install for (default: this machine's).
	Host manifest.Platform
	// ModuleMirror, when set, supplies remote modules from module packages in OCI registries
	// (a loaded bundle) instead of their origins: see module.Options.Mirror.
	ModuleMirror func(ctx context.Context, r *module.Resolved, locked *module.LockEntry) (oci.ReadOnly, oci.Ref, bool, error)
	// ModuleLimits bound the module walk (zero fields: module.Walk's defaults).
	ModuleLimits module.Limits
}

func hostPlatform() manifest.Platform {
	return manifest.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
}

func (o *Options) host() manifest.Platform {
	if o.Host.OS != "" {
		return o.Host
	}
	return hostPlatform()
}

// Provider is a provider the configuration requires, with the block of oprov.hcl that manages it:
// an oci_mirror block (Mirror) or a provider block that keeps it as source (Kept).
type Provider struct {
	Req    *config.Requirement
	Mirror *config.Mirror
	Kept   *config.SourceProvider
}

// Addr is the provider's address.
func (p *Provider) Addr() string { return p.Req.Addr.String() }

// Project is a configuration directory with its oprov.hcl, lock file and module lock.
type Project struct {
	Dir       string
	Config    *config.Config
	Managed   []*Provider           // from OCI repositories: locked and installed; sorted by address
	Local     []*Provider           // kept as source, launched by oprov run; sorted by address
	Unmanaged []*config.Requirement // providers no block selects: OpenTofu installs them as usual
	Lock      *config.Lock
	// Modules is the module lock (.terraform.modules.lock.hcl) beside the lock file.
	Modules *module.Lock
	// LockedModules says what LockAll did to the remote modules.
	LockedModules []ModuleChange
	// remoteModules is set when a module call of the configuration is remote: its providers
	// are known once the modules are resolved (the walk adds them to Managed and Unmanaged).
	remoteModules bool
}

// Open reads a configuration directory: oprov.hcl, the modules' required_providers (those of
// remote modules join when they are resolved), the lock and the module lock.
func Open(dir string) (*Project, error) {
	cfg, err := config.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	reqs, remote, err := module.Local(dir)
	if err != nil {
		return nil, err
	}
	lock, err := config.ReadLock(dir)
	if err != nil {
		return nil, err
	}
	mods, err := module.ReadLock(dir)
	if err != nil {
		return nil, err
	}
	if err := checkSelections(cfg, reqs); err != nil {
		return nil, err
	}
	p := &Project{Dir: dir, Config: cfg, Lock: lock, Modules: mods, remoteModules: remote > 0}
	if err := p.classify(reqs); err != nil {
		return nil, err
	}
	if len(p.Managed) == 0 && len(p.Local) == 0 && !p.remoteModules {
		return nil, fmt.Errorf("no provider in %s's required_providers matches an oci_mirror or provider block of %s (check include and exclude)", dir, cfg.Path)
	}
	for _, sp := range cfg.Sources {
		if reqs[sp.Addr.String()] == nil {
			return nil, fmt.Errorf("%s:%d: provider %q is kept as source but the configuration does not require it (add it to required_providers)", sp.Range.Filename, sp.Range.Start.Line, sp.Addr)
		}
	}
	return p, nil
}

// session holds one command's sources: each oci_mirror block's source resolves each version once
// and keeps its registry connections for the whole command.
type session struct {
	opts    *Options
	env     *source.Env
	cfg     *config.Config
	sources source.Multi // made from cfg on first use
}

func newSession(opts *Options) *session {
	if opts.Registry == nil {
		opts.Registry = oci.NewClient(oci.Options{})
	}
	env := &source.Env{Cache: opts.Cache, Registry: opts.Registry, Log: opts.Log}
	return &session{opts: opts, env: env}
}

// session gives a command's session over the project's configuration.
func (p *Project) session(opts *Options) *session {
	s := newSession(opts)
	s.cfg = p.Config
	return s
}

// multi gives the configuration's sources as one: a provider kept as source is answered by its
// directory, every other by the first oci_mirror block that includes it, as OpenTofu's installer
// picks the first installation method that includes a provider.
func (s *session) multi() source.Multi {
	if s.sources == nil {
		for _, sp := range s.cfg.Sources {
			addr := sp.Addr
			s.sources = append(s.sources, source.Selection{
				Source:   source.OpenLocal(sp.LocalDir(), s.env),
				Includes: func(a manifest.ProviderAddress) bool { return a == addr },
			})
		}
		for _, m := range s.cfg.Mirrors {
			s.sources = append(s.sources, source.Selection{Source: source.NewOCI(s.env, m.Policy, m.RepositoryRef), Includes: m.Matches})
		}
	}
	return s.sources
}

// allowed parses a provider's constraints into the set of versions they allow.
func allowed(req *config.Requirement) (versions.Set, error) {
	set, err := manifest.Constraints(req.ConstraintString())
	if err != nil {
		return versions.Set{}, fmt.Errorf("%s: %w", req.Addr, err)
	}
	return set, nil
}

// ErrLockMismatch marks a registry or cache whose content disagrees with the lock file.
var ErrLockMismatch = errors.New("does not match the lock file")

// checkAgainstLock refuses a package the lock does not record.
func checkAgainstLock(e *config.LockEntry, pkg *cache.Package) error {
	zh := zhOf(pkg)
	if e.HasScheme("zh:") && !e.Has(zh) {
		return fmt.Errorf("%s %s: the registry's %s zip (%s) %w: the tag was moved or the release republished since it was locked, so nothing was installed (if the new release is expected, run 'oprov lock --upgrade' and review the change)",
			pkg.Addr, e.Version, pkg.Platform, pkg.Zip, ErrLockMismatch)
	}
	if pkg.H1 != "" && e.HasScheme("h1:") && !e.Has(pkg.H1) {
		return fmt.Errorf("%s %s: the %s package's %s %w, so nothing was installed", pkg.Addr, e.Version, pkg.Platform, pkg.H1, ErrLockMismatch)
	}
	if !e.HasScheme("zh:") && !e.HasScheme("h1:") {
		return fmt.Errorf("%s %s: the lock file records no zh: or h1: hash to check the package against (run 'oprov lock')", pkg.Addr, e.Version)
	}
	return nil
}
