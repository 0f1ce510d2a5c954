package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
	"github.com/oprov/oprov/pkg/origin"
	"github.com/oprov/oprov/pkg/sign"
)

// OCI is an OCI repository per provider (an oci_mirror block, or one reference given on the
// command line). A version's tag is resolved to its index digest once per command; the signature
// check, the platform manifests, the zips, the lock and the cache all work from that digest, so a
// registry that answers two requests for one tag differently cannot get unverified bytes in.
type OCI struct {
	repoFor func(manifest.ProviderAddress) (oci.Ref, error)
	policy  *sign.Policy // nil: no signature required
	env     *Env
	// verified, when set, remembers successful signature checks across sources (verified.go).
	verified *Verified

	mu       sync.Mutex
	targets  map[string]oci.Target
	resolved map[string]*Resolved // by repository@reference
}

func NewOCI(env *Env, policy *sign.Policy, repoFor func(manifest.ProviderAddress) (oci.Ref, error)) *OCI {
	return &OCI{repoFor: repoFor, policy: policy, env: env, targets: map[string]oci.Target{}, resolved: map[string]*Resolved{}}
}

func (s *OCI) ForDisplay(addr manifest.ProviderAddress) string {
	if ref, err := s.repoFor(addr); err == nil {
		return ref.Repo()
	}
	return addr.String()
}

func (s *OCI) target(ctx context.Context, ref oci.Ref) (oci.Target, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.targets[ref.Repo()]; ok {
		return t, nil
	}
	t, err := s.env.registry().Open(ctx, ref, false)
	if err != nil {
		return nil, oci.Explain("open", ref, err)
	}
	s.targets[ref.Repo()] = t
	s.env.Network.Store(true)
	return t, nil
}

func (s *OCI) AvailableVersions(ctx context.Context, addr manifest.ProviderAddress) (versions.List, error) {
	repo, err := s.repoFor(addr)
	if err != nil {
		return nil, err
	}
	t, err := s.target(ctx, repo)
	if err != nil {
		return nil, err
	}
	tagged, err := artifact.ListVersions(ctx, t, s.env.limits())
	if err != nil {
		return nil, oci.Explain("list versions of "+addr.String(), repo, err)
	}
	list := make(versions.List, 0, len(tagged))
	for _, tv := range tagged {
		list = append(list, tv.Version)
	}
	return list, nil
}

func (s *OCI) Platforms(ctx context.Context, addr manifest.ProviderAddress, version versions.Version) ([]manifest.Platform, error) {
	rv, err := s.resolveVersion(ctx, addr, version)
	if err != nil {
		return nil, err
	}
	return rv.v.Parsed.Platforms(), nil
}

func (s *OCI) PackageFor(ctx context.Context, addr manifest.ProviderAddress, version versions.Version, platform manifest.Platform) (*cache.Package, error) {
	repo, tag, err := s.versionRef(addr, version)
	if err != nil {
		return nil, err
	}
	var fromCache error
	if cacheAllowed(ctx) {
		// The cache's evidence, checked again now under the policy as it is: nothing on disk says
		// a version was verified, so a record planted there proves nothing.
		rv, err := s.resolveRef(ctx, repo.WithReference(tag), addr, true)
		if err == nil {
			var pkg *cache.Package
			if pkg, err = rv.PackageFor(ctx, addr, platform); err == nil {
				return pkg, nil
			}
		}
		fromCache = err
	}
	rv, err := s.resolveVersion(ctx, addr, version)
	if err != nil {
		var se *sign.Error
		if errors.As(fromCache, &se) && !errors.As(err, &se) {
			return nil, fmt.Errorf("%w (and the evidence in the cache does not pass either: %v)", err, fromCache)
		}
		return nil, err
	}
	return rv.PackageFor(ctx, addr, platform)
}

// resolveVersion resolves a version's tag, once per command.
func (s *OCI) resolveVersion(ctx context.Context, addr manifest.ProviderAddress, version versions.Version) (*Resolved, error) {
	repo, tag, err := s.versionRef(addr, version)
	if err != nil {
		return nil, err
	}
	return s.Resolve(ctx, repo.WithReference(tag), addr)
}

// versionRef gives the repository of addr and the tag of version in it.
func (s *OCI) versionRef(addr manifest.ProviderAddress, version versions.Version) (oci.Ref, string, error) {
	repo, err := s.repoFor(addr)
	if err != nil {
		return oci.Ref{}, "", err
	}
	tag, err := manifest.VersionToTag(version.String())
	return repo, tag, err
}

// Resolve fetches the index a tag or digest names (one request), checks its signature per the
// policy against exactly that digest, and remembers the outcome for the rest of the command.
func (s *OCI) Resolve(ctx context.Context, ref oci.Ref, addr manifest.ProviderAddress) (*Resolved, error) {
	return s.resolveRef(ctx, ref, addr, false)
}

// resolveRef resolves ref once per command, from the registry (keeping what it reads as
// evidence in the cache) or, fromCache, from that evidence alone, offline; either way every
// check runs on what was read.
func (s *OCI) resolveRef(ctx context.Context, ref oci.Ref, addr manifest.ProviderAddress, fromCache bool) (*Resolved, error) {
	key := ref.String()
	if fromCache {
		key = "cache " + key
	}
	s.mu.Lock()
	rv, ok := s.resolved[key]
	if !ok {
		rv = &Resolved{src: s, ref: ref, fromCache: fromCache, platforms: map[manifest.Platform]*artifact.Platform{}}
		s.resolved[key] = rv
	}
	s.mu.Unlock()
	rv.once.Do(func() { rv.err = rv.load(ctx, addr) })
	if rv.err != nil {
		return nil, rv.err
	}
	return rv, nil
}

// Resolved is one version's index, resolved and verified once, with the platform
// manifests fetched so far (each once, by digest).
type Resolved struct {
	src       *OCI
	ref       oci.Ref
	fromCache bool // answered from the cache's evidence, offline
	once      sync.Once
	err       error

	// t is where manifests and signatures are read: the registry through the cache's recorder,
	// or the cache's evidence.
	t    oci.ReadOnly
	v    *artifact.Version
	auth cache.Authentication

	mu        sync.Mutex
	platforms map[manifest.Platform]*artifact.Platform
	meta      *cache.VersionMeta // nil for a version named by digest, or answered from the cache
}

func (rv *Resolved) load(ctx context.Context, addr manifest.ProviderAddress) error {
	s := rv.src
	if rv.fromCache {
		rv.t = s.env.Cache.Evidence(rv.ref)
	} else {
		t, err := s.target(ctx, rv.ref)
		if err != nil {
			return err
		}
		rv.t = s.env.Cache.Recording(t, rv.ref)
	}
	v, err := artifact.ResolveVersion(ctx, rv.t, rv.ref, rv.src.env.limits())
	if err != nil {
		return oci.Explain("resolve "+addr.String(), rv.ref, err)
	}
	rv.v = v
	if err := rv.authenticate(ctx, addr); err != nil {
		return err
	}
	if rv.ref.IsDigest() || rv.fromCache {
		return nil
	}
	rv.meta = &cache.VersionMeta{Repository: rv.ref.Repo(), Tag: rv.ref.Reference, Version: v.Version, Index: v.Index.Digest, Platforms: map[string]*cache.PlatformMeta{}}
	for _, e := range v.Parsed.Entries {
		rv.meta.Platforms[e.Platform.String()] = &cache.PlatformMeta{Manifest: e.Descriptor.Digest, H1: e.H1}
	}
	return s.env.Cache.WriteMeta(rv.ref, rv.meta)
}

// authenticate judges the version's signatures under the policy, from what rv.t holds: the same
// verifier whether that is the registry or the cache's evidence.
func (rv *Resolved) authenticate(ctx context.Context, addr manifest.ProviderAddress) error {
	s, v := rv.src, rv.v
	rv.auth = cache.Authentication{Method: "none", Subject: v.Index.Digest}
	if s.policy == nil {
		return nil
	}
	if a, ok := s.verified.lookup(addr, rv.ref, v.Index.Digest); ok {
		rv.auth = a
		return nil
	}
	d, err := s.policy.Check(ctx, rv.t, rv.ref, v, addr.String(), sign.VerifyOptions{SignaturesOnly: true, Limits: s.env.limits()})
	if err != nil {
		if a, ok := rv.originEvidence(ctx, addr); ok {
			rv.auth = a
			s.verified.remember(addr, rv.ref, rv.auth)
			return nil
		}
		return fmt.Errorf("%s %s: %w", addr, v.Version, err)
	}
	rv.auth.Rule = d.Rule
	if d.Warning != nil {
		rv.auth.Warning = d.Warning.Error()
		if rv.fromCache {
			rv.auth.Warning += " (answered from the cache)"
		}
		s.env.warn(addr, v.Version, rv.auth.Warning)
	}
	if d.Result != nil {
		rv.auth.Method = "cosign"
		for _, sig := range d.Result.Signatures {
			rv.auth.Keys = append(rv.auth.Keys, sig.By())
		}
	}
	s.verified.remember(addr, rv.ref, rv.auth)
	return nil
}

// maxKeptEvidence bounds the origin evidence an Authentication keeps (it is remembered with the
// version, by Verified): a release's SHA256SUMS, signature and key are a few KiB.
const maxKeptEvidence = 256 << 10

// originEvidence authenticates a version its policy refused by the origin evidence it carries (an
// origin registry's signed SHA256SUMS, as mirror and 'save --config' attach it) when the rule that
// covers it names, in origin_keys, the key that signed: the policy's own trust, as load applies
// it. The evidence's SHA256SUMS, signature and signing key are kept on the Authentication.
func (rv *Resolved) originEvidence(ctx context.Context, addr manifest.ProviderAddress) (cache.Authentication, bool) {
	r := rv.src.policy.Match(rv.ref.Repo(), addr.String())
	if r == nil || len(r.OriginKeys) == 0 {
		return cache.Authentication{}, false
	}
	res, err := origin.VerifyEvidence(ctx, rv.t, rv.v, r.OriginKeys)
	if err != nil || len(res.Sums)+len(res.Signature)+len(res.SignerKey) > maxKeptEvidence {
		return cache.Authentication{}, false
	}
	sumsName := "terraform-provider-" + addr.Type + "_" + rv.v.Version + "_SHA256SUMS"
	return cache.Authentication{Method: "gpg", Subject: rv.v.Index.Digest, Keys: []string{res.KeyID}, Rule: r.Name,
		Evidence: &cache.Evidence{ArtifactType: origin.ArtifactTypeChecksums, Files: []referrers.AttachFile{
			{Name: sumsName, MediaType: "text/plain", Data: res.Sums},
			{Name: sumsName + ".sig", MediaType: "application/pgp-signature", Data: res.Signature},
			{Name: "signing-key.asc", MediaType: "application/pgp-keys", Data: []byte(res.SignerKey)},
		}}}, true
}

// platform fetches one platform's manifest by the digest the verified index names, once.
func (rv *Resolved) platform(ctx context.Context, want manifest.Platform) (*artifact.Platform, error) {
	rv.mu.Lock()
	p, ok := rv.platforms[want]
	rv.mu.Unlock()
	if ok {
		return p, nil
	}
	e, found := rv.v.Parsed.Lookup(want)
	if !found {
		return nil, fmt.Errorf("%s has no package for %s (it has %s)", rv.ref, want, platformList(rv.v.Parsed.Platforms()))
	}
	p, err := artifact.FetchPlatform(ctx, rv.t, rv.v, e)
	if err == nil {
		err = rv.v.CheckPlatform(p)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rv.ref, err)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.platforms[want] = p
	if rv.meta != nil {
		pm := rv.meta.Platforms[want.String()]
		pm.Zip, pm.Size, pm.Filename = p.Zip.Digest, p.Zip.Size, p.Filename
		if err := rv.src.env.Cache.WriteMeta(rv.ref, rv.meta); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// PackageFor gives one platform's package of the resolved version. Its h1: is what the index
// (which the signature or the lock covers) states, never what a record on disk remembers.
func (rv *Resolved) PackageFor(ctx context.Context, addr manifest.ProviderAddress, platform manifest.Platform) (*cache.Package, error) {
	p, err := rv.platform(ctx, platform)
	if err != nil {
		return nil, err
	}
	e, _ := rv.v.Parsed.Lookup(platform)
	pkg := &cache.Package{
		Addr: addr, Version: rv.v.Version, Platform: platform, Filename: p.Filename, Zip: p.Zip.Digest, Size: p.Zip.Size, MaxSize: rv.src.env.limits().MaxPackageSize, H1: e.H1, Auth: rv.auth,
		FromCache: rv.fromCache,
		Fetch: func(ctx context.Context, w io.Writer, progress oci.Progress) error {
			t, err := rv.src.target(ctx, rv.ref) // zips come from the registry, never the recorder
			if err != nil {
				return err
			}
			return artifact.FetchZip(ctx, t, p, w, progress, rv.src.env.limits())
		},
	}
	return pkg, nil
}
