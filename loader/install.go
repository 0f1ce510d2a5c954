package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/release"
	"github.com/oprov/oprov/pkg/sign"
)

// Options tune locking and installing.
type Options struct {
	Cache    *Cache
	Registry oci.Options
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
}

func (o *Options) host() manifest.Platform {
	if o.Host.OS != "" {
		return o.Host
	}
	return manifest.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Provider is a provider the configuration requires that an oci_mirror block manages.
type Provider struct {
	Req    *Requirement
	Mirror *Mirror
	Repo   oci.Ref // the repository, without a tag
}

// Addr is the provider's address.
func (p *Provider) Addr() string { return p.Req.Addr.String() }

// Project is a configuration directory with its oprov.hcl and lock file.
type Project struct {
	Dir       string
	Config    *Config
	Managed   []*Provider    // sorted by address
	Sources   []*Source      // providers kept as source, for oprov run
	Unmanaged []*Requirement // providers no oci_mirror block selects: OpenTofu installs them as usual
	Lock      *Lock
}

// Open reads a configuration directory: oprov.hcl, the modules' required_providers, and the lock.
func Open(dir string) (*Project, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	reqs, err := ReadRequirements(dir)
	if err != nil {
		return nil, err
	}
	lock, err := ReadLock(dir)
	if err != nil {
		return nil, err
	}
	p := &Project{Dir: dir, Config: cfg, Lock: lock}
	addrs := make([]string, 0, len(reqs))
	for a := range reqs {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		r := reqs[a]
		if sp := cfg.SourceFor(r.Addr); sp != nil {
			p.Sources = append(p.Sources, &Source{Req: r, SourceProvider: sp})
			continue
		}
		m := cfg.MirrorFor(r.Addr)
		if m == nil {
			p.Unmanaged = append(p.Unmanaged, r)
			continue
		}
		repo := m.Repository(r.Addr)
		ref, err := oci.ParseRef(repo)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: repository_template gives %q for %s: %w", m.Range.Filename, m.Range.Start.Line, repo, a, err)
		}
		p.Managed = append(p.Managed, &Provider{Req: r, Mirror: m, Repo: ref})
	}
	if len(p.Managed) == 0 && len(p.Sources) == 0 {
		return nil, fmt.Errorf("no provider in %s's required_providers matches an oci_mirror or provider block of %s (check include and exclude)", dir, cfg.Path)
	}
	for _, sp := range cfg.Sources {
		if reqs[sp.Addr.String()] == nil {
			return nil, fmt.Errorf("%s:%d: provider %q is kept as source but the configuration does not require it (add it to required_providers)", sp.Range.Filename, sp.Range.Start.Line, sp.Addr)
		}
	}
	return p, nil
}

// allowed parses a provider's constraints into the set of versions they allow.
func allowed(req *Requirement) (versions.Set, error) {
	set, err := manifest.Constraints(req.ConstraintString())
	if err != nil {
		return versions.Set{}, fmt.Errorf("%s: %w", req.Addr, err)
	}
	return set, nil
}

// session holds the registry targets opened so far; a run that needs none opens none.
type session struct {
	opts    *Options
	targets map[string]oci.Target
}

func (s *session) target(ctx context.Context, ref oci.Ref) (oci.Target, error) {
	if t, ok := s.targets[ref.Repo()]; ok {
		return t, nil
	}
	t, err := oci.Open(ctx, ref, s.opts.Registry, false)
	if err != nil {
		return nil, oci.Explain("open", ref, err)
	}
	if s.targets == nil {
		s.targets = map[string]oci.Target{}
	}
	s.targets[ref.Repo()] = t
	return t, nil
}

// LockChange says what locking did to one provider.
type LockChange struct {
	Addr      string `json:"address"`
	Version   string `json:"version"`
	Previous  string `json:"previous_version,omitempty"`
	Platforms int    `json:"platforms"`
	Hashes    int    `json:"hashes"`
}

// LockAll resolves every managed provider and writes their lock entries (version, constraints,
// and zh:/h1: hashes for every platform locked), leaving other entries byte for byte.
func (p *Project) LockAll(ctx context.Context, opts Options) ([]LockChange, error) {
	s := &session{opts: &opts}
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
	return changes, nil
}

func (p *Project) lockOne(ctx context.Context, s *session, pv *Provider) (*LockChange, error) {
	set, err := allowed(pv.Req)
	if err != nil {
		return nil, err
	}
	t, err := s.target(ctx, pv.Repo)
	if err != nil {
		return nil, err
	}
	available, err := oci.ListVersions(ctx, t)
	if err != nil {
		return nil, oci.Explain("lock "+pv.Addr(), pv.Repo, err)
	}
	var list versions.List
	tags := map[string]string{}
	for _, tv := range available {
		list = append(list, tv.Version)
		tags[tv.Version.String()] = tv.Tag
	}
	prev := p.Lock.Entries[pv.Addr()]
	var chosen versions.Version
	if prev != nil && !s.opts.Upgrade {
		if v, err := manifest.ParseVersion(prev.Version); err == nil && set.Has(v) && tags[v.String()] != "" {
			chosen = v
		}
	}
	if chosen == versions.Unspecified {
		chosen = list.NewestInSet(set)
		if chosen == versions.Unspecified {
			var have []string
			for _, v := range list {
				have = append(have, v.String())
			}
			if len(have) == 0 {
				have = []string{"none"}
			}
			return nil, fmt.Errorf("lock %s: no version in %s meets %q (it has: %s)", pv.Addr(), pv.Repo, pv.Req.ConstraintString(), strings.Join(have, ", "))
		}
	}
	tag := tags[chosen.String()]
	meta, err := p.fetchVersion(ctx, s, pv, tag, s.opts.Platforms, true)
	if err != nil {
		return nil, err
	}
	entry := &LockEntry{Addr: pv.Addr(), Version: chosen.String(), Constraints: pv.Req.ConstraintString()}
	n := 0
	for _, pm := range meta.Platforms {
		if pm.H1 == "" {
			continue
		}
		entry.Hashes = append(entry.Hashes, pm.H1, release.ZH(pm.Zip.Encoded()))
		n++
	}
	p.Lock.Set(entry)
	c := &LockChange{Addr: pv.Addr(), Version: entry.Version, Platforms: n, Hashes: len(p.Lock.Entries[pv.Addr()].Hashes)}
	if prev != nil && prev.Version != entry.Version {
		c.Previous = prev.Version
	}
	return c, nil
}

// fetchVersion reads a version from its repository: the index and every platform manifest
// (digests checked), its signatures when the oci_mirror block has a policy, and the zips of
// the given platforms (all when zipsFor is empty and all is true) into the cache, with their h1
// hashes. It records what it learnt in the cache and returns it.
func (p *Project) fetchVersion(ctx context.Context, s *session, pv *Provider, tag string, zipsFor []manifest.Platform, all bool) (*VersionMeta, error) {
	t, err := s.target(ctx, pv.Repo)
	if err != nil {
		return nil, err
	}
	ref := pv.Repo.WithReference(tag)
	v, err := oci.ResolveVersion(ctx, t, ref)
	if err != nil {
		return nil, oci.Explain("install "+pv.Addr(), ref, err)
	}
	meta := &VersionMeta{Repository: pv.Repo.Repo(), Tag: tag, Version: v.Version, Index: v.Index.Digest, Platforms: map[string]*PlatformMeta{}}
	if pol := pv.Mirror.Policy; pol != nil {
		d, err := pol.VerifyWithPolicy(ctx, t, ref, pv.Addr(), sign.VerifyOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", pv.Addr(), v.Version, err)
		}
		if d.Warning != nil {
			s.opts.logf("oprov: warning (policy mode warn): %s %s: %v", pv.Addr(), v.Version, d.Warning)
		}
		if d.Result != nil {
			for _, sig := range d.Result.Signatures {
				meta.Verified = append(meta.Verified, sig.KeyHint)
			}
		}
	}
	want := map[manifest.Platform]bool{}
	for _, pl := range zipsFor {
		if _, ok := v.Parsed.Lookup(pl); !ok {
			return nil, fmt.Errorf("%s %s has no package for %s (it has %s)", pv.Addr(), v.Version, pl, platformList(v.Parsed.Platforms()))
		}
		want[pl] = true
	}
	type fetched struct {
		p  *oci.Platform
		pm *PlatformMeta
	}
	results := make([]fetched, len(v.Parsed.Entries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(oci.DefaultConcurrency)
	for i, e := range v.Parsed.Entries {
		g.Go(func() error {
			pl, err := oci.FetchPlatform(gctx, t, v, e)
			if err != nil {
				return fmt.Errorf("%s %s: %w", pv.Addr(), v.Version, err)
			}
			pm := &PlatformMeta{Manifest: pl.Manifest.Digest, Zip: pl.Zip.Digest, Size: pl.Zip.Size, Filename: pl.Filename}
			if want[e.Platform] || (all && len(zipsFor) == 0) {
				path, err := s.opts.Cache.PutBlob(gctx, pl.Zip.Digest, pl.Zip.Size, func(w io.Writer) error {
					return oci.FetchZip(gctx, t, pl, w, s.opts.Progress)
				})
				if err != nil {
					return fmt.Errorf("%s %s: %w", pv.Addr(), v.Version, err)
				}
				if pm.H1, err = release.HashZipH1(path); err != nil {
					return err
				}
			}
			results[i] = fetched{pl, pm}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	// Keep h1 hashes learnt earlier for platforms not fetched this time.
	old, _ := s.opts.Cache.ReadMeta(pv.Repo, tag)
	for i, e := range v.Parsed.Entries {
		pm := results[i].pm
		if pm.H1 == "" && old != nil && old.Index == meta.Index {
			if op := old.Platforms[e.Platform.String()]; op != nil && op.Zip == pm.Zip {
				pm.H1 = op.H1
			}
		}
		meta.Platforms[e.Platform.String()] = pm
	}
	if err := s.opts.Cache.WriteMeta(pv.Repo, meta); err != nil {
		return nil, err
	}
	return meta, nil
}

func platformList(ps []manifest.Platform) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}

// Installed is one provider made ready for OpenTofu.
type Installed struct {
	Addr       string `json:"address"`
	Version    string `json:"version"`
	Platform   string `json:"platform"`
	Zip        string `json:"zip_digest"`
	MirrorRoot string `json:"mirror"`
	FromCache  bool   `json:"from_cache"`
}

// InstallResult is what Install did.
type InstallResult struct {
	Installed []Installed  `json:"installed"`
	Locked    []LockChange `json:"locked,omitempty"`
	Unmanaged []string     `json:"unmanaged,omitempty"`
	Sources   []string     `json:"kept_as_source,omitempty"` // launched only by oprov run
	Network   bool         `json:"network"`
}

// ErrLockMismatch marks a registry or cache whose content disagrees with the lock file.
var ErrLockMismatch = errors.New("does not match the lock file")

// Install makes every managed provider ready: it locks those the lock file lacks (or whose
// constraints the locked version no longer meets), verifies signatures per the policy, fetches
// this machine's zip into the cache, checks it against the lock, and unpacks it into the cache's
// filesystem mirror. With a warm cache and a complete lock it makes no network request.
// Nothing is unpacked for a provider whose zip disagrees with the lock.
func (p *Project) Install(ctx context.Context, opts Options) (*InstallResult, error) {
	s := &session{opts: &opts}
	res := &InstallResult{}
	for _, r := range p.Unmanaged {
		res.Unmanaged = append(res.Unmanaged, r.Addr.String())
	}
	for _, src := range p.Sources {
		res.Sources = append(res.Sources, src.Addr.String())
	}
	host := opts.host()
	// First make sure the lock covers every managed provider.
	for _, pv := range p.Managed {
		e := p.Lock.Entries[pv.Addr()]
		if e != nil {
			set, err := allowed(pv.Req)
			if err != nil {
				return nil, err
			}
			if v, err := manifest.ParseVersion(e.Version); err == nil && set.Has(v) && len(e.Hashes) > 0 {
				continue
			}
		}
		c, err := p.lockOne(ctx, s, pv)
		if err != nil {
			return nil, err
		}
		res.Locked = append(res.Locked, *c)
	}
	// Then check every provider against the lock before anything is unpacked.
	type plan struct {
		pv   *Provider
		e    *LockEntry
		meta *VersionMeta
		pm   *PlatformMeta
	}
	var plans []plan
	for _, pv := range p.Managed {
		e := p.Lock.Entries[pv.Addr()]
		tag, err := manifest.VersionToTag(e.Version)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p.Lock.Path, pv.Addr(), err)
		}
		meta, err := opts.Cache.ReadMeta(pv.Repo, tag)
		if err != nil {
			return nil, err
		}
		if !usable(meta, e, pv, host) {
			if meta, err = p.fetchVersion(ctx, s, pv, tag, []manifest.Platform{host}, false); err != nil {
				return nil, err
			}
		}
		pm := meta.Platforms[host.String()]
		if pm == nil {
			var have []string
			for k := range meta.Platforms {
				have = append(have, k)
			}
			sort.Strings(have)
			return nil, fmt.Errorf("%s %s has no package for this machine (%s); it has %s", pv.Addr(), e.Version, host, strings.Join(have, ", "))
		}
		if err := checkAgainstLock(pv, e, pm, host); err != nil {
			return nil, err
		}
		plans = append(plans, plan{pv, e, meta, pm})
	}
	// Fetch what the cache lacks, check it, and unpack it.
	for _, pl := range plans {
		root := opts.Cache.MirrorRoot(pl.pm.Zip, pl.pv.Req.Addr, pl.e.Version, host)
		fromCache := true
		// Already unpacked: tofu checks the unpacked package against the lock's h1: hash whenever
		// it installs from the mirror, so the zip need not be hashed again.
		if !dirExists(root) {
			var err error
			if fromCache, err = p.ensureZip(ctx, s, pl.pv, pl.e, pl.meta, pl.pm, host); err != nil {
				return nil, err
			}
			if root, err = opts.Cache.EnsureMirror(ctx, pl.pm.Zip, pl.pv.Req.Addr, pl.e.Version, host); err != nil {
				return nil, fmt.Errorf("%s %s: %w", pl.pv.Addr(), pl.e.Version, err)
			}
		}
		res.Installed = append(res.Installed, Installed{
			Addr: pl.pv.Addr(), Version: pl.e.Version, Platform: host.String(), Zip: pl.pm.Zip.String(),
			MirrorRoot: root, FromCache: fromCache,
		})
	}
	if err := p.Lock.Write(); err != nil {
		return nil, err
	}
	res.Network = len(s.targets) > 0
	return res, nil
}

// ensureZip makes sure the cache holds a provider's zip for this platform, checked: a cached one
// is re-hashed (a cache on disk can be tampered with), a missing one is fetched against its
// digest and, when its h1: was not known yet, checked against the lock.
// It reports whether the zip was in the cache already.
func (p *Project) ensureZip(ctx context.Context, s *session, pv *Provider, e *LockEntry, meta *VersionMeta, pm *PlatformMeta, host manifest.Platform) (bool, error) {
	c := s.opts.Cache
	if c.HasBlob(pm.Zip) {
		return true, c.CheckBlob(pm.Zip)
	}
	t, err := s.target(ctx, pv.Repo)
	if err != nil {
		return false, err
	}
	zp := &oci.Platform{Platform: host, Zip: zipDescriptor(pm), Filename: pm.Filename}
	path, err := c.PutBlob(ctx, pm.Zip, pm.Size, func(w io.Writer) error {
		return oci.FetchZip(ctx, t, zp, w, s.opts.Progress)
	})
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", pv.Addr(), e.Version, err)
	}
	if pm.H1 != "" {
		return false, nil
	}
	if pm.H1, err = release.HashZipH1(path); err != nil {
		return false, err
	}
	if err := checkAgainstLock(pv, e, pm, host); err != nil {
		return false, err
	}
	return false, c.WriteMeta(pv.Repo, meta)
}

// usable reports whether cached metadata can stand in for the registry: it is for the locked
// version, agrees with the lock on this platform's zip, and, when a policy applies, records a
// verification by a key the policy trusts for this provider.
func usable(meta *VersionMeta, e *LockEntry, pv *Provider, host manifest.Platform) bool {
	if meta == nil || meta.Version != e.Version {
		return false
	}
	pm := meta.Platforms[host.String()]
	if pm == nil || (e.HasScheme("zh:") && !e.Has(release.ZH(pm.Zip.Encoded()))) {
		return false
	}
	if pol := pv.Mirror.Policy; pol != nil {
		r := pol.Match(pv.Repo.Repo(), pv.Addr())
		if r == nil {
			return pol.Mode == sign.ModeWarn
		}
		if r.Mode == sign.ModeWarn {
			return true
		}
		for _, k := range r.Keys {
			for _, h := range meta.Verified {
				if k.Hint == h {
					return true
				}
			}
		}
		return false
	}
	return true
}

// checkAgainstLock refuses a package the lock does not record.
func checkAgainstLock(pv *Provider, e *LockEntry, pm *PlatformMeta, host manifest.Platform) error {
	zh := release.ZH(pm.Zip.Encoded())
	if e.HasScheme("zh:") && !e.Has(zh) {
		return fmt.Errorf("%s %s: the registry's %s zip (%s) %w: the tag was moved or the release republished since it was locked, so nothing was installed (if the new release is expected, run 'oprov lock --upgrade' and review the change)",
			pv.Addr(), e.Version, host, pm.Zip, ErrLockMismatch)
	}
	if pm.H1 != "" && e.HasScheme("h1:") && !e.Has(pm.H1) {
		return fmt.Errorf("%s %s: the %s package's %s %w, so nothing was installed", pv.Addr(), e.Version, host, pm.H1, ErrLockMismatch)
	}
	if !e.HasScheme("zh:") && !e.HasScheme("h1:") {
		return fmt.Errorf("%s %s: the lock file records no zh: or h1: hash to check the package against (run 'oprov lock')", pv.Addr(), e.Version)
	}
	return nil
}

// zipDescriptor rebuilds a cached platform's zip descriptor.
func zipDescriptor(pm *PlatformMeta) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: manifest.MediaTypeZip, Digest: pm.Zip, Size: pm.Size}
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
