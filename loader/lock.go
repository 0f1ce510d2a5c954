package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
)

// LockChange says what locking did to one provider.
type LockChange struct {
	Addr      string `json:"address"`
	Version   string `json:"version"`
	Previous  string `json:"previous_version,omitempty"`
	Platforms int    `json:"platform_count"` // "platforms" is always a list in oprov's JSON
	Hashes    int    `json:"hashes"`
}

// LockAll resolves every managed provider and writes their lock entries (version, constraints,
// and zh:/h1: hashes for every platform locked), leaving other entries byte for byte.
//
// Remote modules are resolved first (their required_providers join the providers to lock) and
// recorded in the module lock: a call the module lock records is kept at its version and checked
// against its hashes unless upgrading.
func (p *Project) LockAll(ctx context.Context, opts Options) ([]LockChange, error) {
	_, mods, err := p.resolveModules(ctx, &opts, opts.Upgrade, true)
	if err != nil {
		return nil, err
	}
	p.LockedModules = mods
	s := p.session(&opts)
	var changes []LockChange
	for _, pv := range p.Managed {
		c, err := p.lockOne(ctx, s, pv)
		if err != nil {
			return nil, err
		}
		changes = append(changes, *c)
	}
	if err := p.Lock.Write(); err != nil {
		return nil, err
	}
	if err := p.Modules.Write(); err != nil {
		return nil, err
	}
	return changes, nil
}

// lockOne picks a provider's version (the locked one while it still meets the constraints,
// unless upgrading) and records the hashes of every platform's package. It asks the source, not
// the cache: a lock records what the registry serves now.
func (p *Project) lockOne(ctx context.Context, s *session, pv *Provider) (*LockChange, error) {
	ctx = source.WithoutCache(ctx)
	src := s.multi()
	chosen, err := p.chooseVersion(ctx, s, src, pv)
	if err != nil {
		return nil, err
	}
	platforms := s.opts.Platforms
	if len(platforms) == 0 {
		if platforms, err = src.Platforms(ctx, pv.Req.Addr, chosen); err != nil {
			return nil, err
		}
	}
	pkgs := make([]*cache.Package, len(platforms))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(oci.DefaultConcurrency)
	for i, pl := range platforms {
		g.Go(func() error {
			pkg, err := src.PackageFor(gctx, pv.Req.Addr, chosen, pl)
			if err != nil {
				return err
			}
			if pkg.H1 == "" { // the index states none: the zip's contents say
				z, err := s.opts.Cache.PutZip(gctx, pkg, true, s.opts.Progress)
				if err != nil {
					return err
				}
				pkg.Learn(z.H1)
			}
			pkgs[i] = pkg
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	entry := &config.LockEntry{Addr: pv.Addr(), Version: chosen.String(), Constraints: pv.Req.ConstraintString()}
	for _, pkg := range pkgs {
		entry.Hashes = append(entry.Hashes, pkg.H1, zhOf(pkg))
	}
	prev := p.Lock.Entries[pv.Addr()]
	p.Lock.Set(entry)
	c := &LockChange{Addr: pv.Addr(), Version: entry.Version, Platforms: len(pkgs), Hashes: len(p.Lock.Entries[pv.Addr()].Hashes)}
	if prev != nil && prev.Version != entry.Version {
		c.Previous = prev.Version
	}
	return c, nil
}

func zhOf(pkg *cache.Package) string { return pkghash.ZH(pkg.Zip.Encoded()) }

// chooseVersion keeps the locked version while it meets the constraints and is still offered,
// unless upgrading, and otherwise picks the newest version that meets them.
func (p *Project) chooseVersion(ctx context.Context, s *session, src source.Source, pv *Provider) (versions.Version, error) {
	set, err := allowed(pv.Req)
	if err != nil {
		return versions.Unspecified, err
	}
	list, err := src.AvailableVersions(ctx, pv.Req.Addr)
	if err != nil {
		return versions.Unspecified, err
	}
	if prev := p.Lock.Entries[pv.Addr()]; prev != nil && !s.opts.Upgrade {
		if v, err := manifest.ParseVersion(prev.Version); err == nil && set.Has(v) && hasVersion(list, v) {
			return v, nil
		}
	}
	if chosen := list.NewestInSet(set); chosen != versions.Unspecified {
		return p.newestPassing(ctx, s, src, pv, list.Filter(set))
	}
	var have []string
	for _, v := range list {
		have = append(have, v.String())
	}
	if len(have) == 0 {
		have = []string{"none"}
	}
	return versions.Unspecified, fmt.Errorf("lock %s: no version in %s meets %q (it has: %s)", pv.Addr(), src.ForDisplay(pv.Req.Addr), pv.Req.ConstraintString(), strings.Join(have, ", "))
}

// newestPassing gives the newest of candidates that passes the policy, as 'oprov serve' offers
// only the versions that pass: one unsigned pre-release does not break every consumer. It says on
// the log which newer versions it passed over and why, and fails, naming each refusal, what to
// pin and whom to ask, only when none passes.
func (p *Project) newestPassing(ctx context.Context, s *session, src source.Source, pv *Provider, candidates versions.List) (versions.Version, error) {
	candidates.Sort()
	var refused []string
	var newest *sign.Error
	for i := len(candidates) - 1; i >= 0; i-- {
		v := candidates[i]
		_, err := src.Platforms(ctx, pv.Req.Addr, v) // resolves the version and checks it under the policy
		var se *sign.Error
		if errors.As(err, &se) {
			refused = append(refused, v.String()+": "+se.Reason)
			if newest == nil {
				newest = se
			}
			continue
		}
		if err != nil {
			return versions.Unspecified, err
		}
		for _, r := range refused {
			logf(s.opts.Log, "oprov: note: %s: chose %s; skipped the newer %s", pv.Addr(), v, r)
		}
		return v, nil
	}
	repo := src.ForDisplay(pv.Req.Addr)
	return versions.Unspecified, &noVersionPasses{newest: newest, msg: fmt.Sprintf(
		"lock %s: no version in %s meeting %q passes the trust policy: %s; pin a version that passes in required_providers, or ask the publisher of %s to sign one with a key the policy trusts",
		pv.Addr(), repo, pv.Req.ConstraintString(), strings.Join(refused, "; "), repo)}
}

// noVersionPasses is a lock that found versions meeting the constraints but none the policy
// accepts; it unwraps to the newest one's refusal, so it is classed as that refusal is.
type noVersionPasses struct {
	msg    string
	newest *sign.Error
}

func (e *noVersionPasses) Error() string { return e.msg }
func (e *noVersionPasses) Unwrap() error { return e.newest }

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

func hasVersion(list versions.List, v versions.Version) bool {
	for _, have := range list {
		if have.Same(v) {
			return true
		}
	}
	return false
}
