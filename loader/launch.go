package loader

import (
	"context"
	"os"
	"path/filepath"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
)

// FetchRef gets the version one reference names (a tag or a digest) ready to run, through the
// same source and checks as an install: resolved once, the signature per the policy (when one is
// given) over exactly that digest, this machine's zip checked into the cache, and unpacked
// safely. It returns the executable.
func FetchRef(ctx context.Context, ref oci.Ref, addr manifest.ProviderAddress, policy *sign.Policy, opts Options) (string, error) {
	s := newSession(&opts)
	src := source.NewOCI(s.env, policy, func(manifest.ProviderAddress) (oci.Ref, error) { return ref, nil })
	rv, err := src.Resolve(ctx, ref, addr)
	if err != nil {
		return "", err
	}
	pkg, err := rv.PackageFor(ctx, addr, opts.host())
	if err != nil {
		return "", err
	}
	if pkg.Version == "" { // named by digest: take the version from the zip's name
		pkg.Version = "0.0.0"
		if fn, err := providerrelease.ParseFilename(pkg.Filename); err == nil {
			pkg.Version = fn.Version
		}
	}
	in, err := opts.install(ctx, pkg, nil)
	if err != nil {
		return "", err
	}
	return in.Executable, nil
}

// Launchable is a provider ready to launch: its address and executable, and a word on where it
// came from (a version, or how it was built).
type Launchable struct {
	Addr       string
	Version    string
	H1         string // the h1: hash of the package, when it has one
	Executable string
	What       string
	// Open opens Executable for launch, refusing a file that is not the one checked when it was
	// installed (cache.Installed.OpenExecutable); the provider is run from that descriptor.
	Open func() (*os.File, error)
	// Launcher is what oprov recorded of the launcher it made for a provider kept as source (a
	// stdio provider's host, a venv's script), or nil: a sandbox grants what it runs from this.
	Launcher *source.Launcher
}

// Launchables installs the managed providers and builds the ones kept as source, and gives the
// executables to launch for this machine.
func (p *Project) Launchables(ctx context.Context, opts Options) ([]Launchable, error) {
	var out []Launchable
	if len(p.Managed) > 0 {
		res, err := p.Install(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, in := range res.Installed {
			out = append(out, Launchable{Addr: in.Addr, Version: in.Version, H1: in.entry.H1, Executable: in.Executable, What: in.Version, Open: in.entry.OpenExecutable})
		}
	}
	s := p.session(&opts)
	for _, pv := range p.Local {
		src := s.multi()
		pkg, err := src.PackageFor(ctx, pv.Req.Addr, source.Dev, s.opts.host())
		if err != nil {
			return nil, err
		}
		in, err := s.opts.Cache.Install(ctx, pkg, nil, s.opts.Progress)
		if err != nil {
			return nil, err
		}
		var rec *source.Launcher
		if pkg.Build != nil { // made by oprov in the cache's build directories, record and all
			if rec, err = source.ReadLauncher(filepath.Dir(in.Executable)); err != nil {
				return nil, err
			}
		}
		out = append(out, Launchable{Addr: pv.Addr(), Version: pkg.Version, Executable: in.Executable, What: detail(pkg, in),
			Open: in.OpenExecutable, Launcher: rec})
	}
	return out, nil
}

// detail says how a package kept as source was made ready: built now, or found built.
func detail(pkg *cache.Package, in *cache.Installed) string {
	if in.Built && pkg.Build != nil {
		return pkg.Build.Fresh
	}
	return pkg.Detail
}

// Members turns launchables into a launch group's members, with the given start options.
func Members(ls []Launchable, base plugin.Options) []plugin.Member {
	out := make([]plugin.Member, len(ls))
	for i, l := range ls {
		o := base
		o.Path = l.Executable
		o.Open = l.Open
		out[i] = plugin.Member{Addr: l.Addr, Options: o}
	}
	return out
}
