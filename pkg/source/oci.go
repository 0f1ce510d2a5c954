package source

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
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
	t, err := oci.Open(ctx, ref, s.env.Registry, false)
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
	tagged, err := artifact.ListVersions(ctx, t)
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

func (s *OCI) PackageFor(ctx context.Context, addr manifest.ProviderAddress, version versions.Version, platform manifest.Platform) (*Package, error) {
	repo, tag, err := s.versionRef(addr, version)
	if err != nil {
		return nil, err
	}
	if cacheAllowed(ctx) {
		if meta, _ := s.env.Cache.ReadMeta(repo, tag); s.trusted(meta, repo, addr) {
			if pm := meta.Platforms[platform.String()]; pm != nil && pm.Zip != "" && meta.Version == version.String() {
				return s.cachedPackage(addr, repo, meta, platform, pm), nil
			}
		}
	}
	rv, err := s.resolveVersion(ctx, addr, version)
	if err != nil {
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
	s.mu.Lock()
	rv, ok := s.resolved[ref.String()]
	if !ok {
		rv = &Resolved{src: s, ref: ref, platforms: map[manifest.Platform]*artifact.Platform{}}
		s.resolved[ref.String()] = rv
	}
	s.mu.Unlock()
	rv.once.Do(func() { rv.err = rv.load(ctx, addr) })
	if rv.err != nil {
		return nil, rv.err
	}
	return rv, nil
}

// trusted reports whether cached metadata may stand in for the registry under the policy: it
// records a verification by a key the policy trusts for this provider now.
func (s *OCI) trusted(meta *cache.VersionMeta, repo oci.Ref, addr manifest.ProviderAddress) bool {
	if meta == nil {
		return false
	}
	if s.policy == nil {
		return true
	}
	r := s.policy.Match(repo.Repo(), addr.String())
	if r == nil {
		return s.policy.Mode == sign.ModeWarn
	}
	return r.Mode == sign.ModeWarn || verifiedBy(r, meta)
}

// cachedPackage answers from cached metadata; the zip is fetched by digest only if asked for.
func (s *OCI) cachedPackage(addr manifest.ProviderAddress, repo oci.Ref, meta *cache.VersionMeta, platform manifest.Platform, pm *cache.PlatformMeta) *Package {
	zp := &artifact.Platform{Platform: platform, Zip: zipDescriptor(pm), Filename: pm.Filename}
	pkg := &Package{
		Addr: addr, Version: meta.Version, Platform: platform, Filename: pm.Filename, Zip: pm.Zip, Size: pm.Size, H1: pm.H1,
		FromCache: true,
		Fetch: func(ctx context.Context, w io.Writer, progress oci.Progress) error {
			t, err := s.target(ctx, repo)
			if err != nil {
				return err
			}
			return artifact.FetchZip(ctx, t, zp, w, progress)
		},
		RecordH1: func(h1 string) error {
			pm.H1 = h1
			return s.env.Cache.WriteMeta(repo, meta)
		},
	}
	pkg.Auth = s.cachedAuth(addr, repo, meta)
	return pkg
}

// cachedAuth says how a version answered from cached metadata stands under the policy now
// (trusted let the metadata stand in): verified by a key the rule that applies trusts, or let
// through unverified by a warn-mode rule, which warns; with no policy, nothing was required.
func (s *OCI) cachedAuth(addr manifest.ProviderAddress, repo oci.Ref, meta *cache.VersionMeta) Authentication {
	a := Authentication{Method: "none", Subject: meta.Index}
	if s.policy == nil {
		return a
	}
	r := s.policy.Match(repo.Repo(), addr.String())
	if r != nil {
		a.Rule = r.Name
		if verifiedBy(r, meta) {
			a.Method, a.Keys = "cosign", meta.VerifiedKeys
			return a
		}
	}
	a.Warning = fmt.Sprintf("index %s of %s was not verified by a key the policy trusts (answered from the cache)", meta.Index, repo.WithReference(meta.Tag))
	s.env.warn(addr, meta.Version, a.Warning)
	return a
}

// verifiedBy reports whether cached metadata records a verification by a key or a keyless
// identity r trusts.
func verifiedBy(r *sign.Rule, meta *cache.VersionMeta) bool {
	for _, h := range meta.Verified {
		for _, k := range r.Keys {
			if k.Hint == h {
				return true
			}
		}
		if js, ok := strings.CutPrefix(h, keylessHint); ok {
			var s sign.CertSigner
			if json.Unmarshal([]byte(js), &s) == nil && r.TrustsSigner(s) {
				return true
			}
		}
	}
	return false
}

// keylessHint marks a keyless signer in the cache's list of what verified a version: the
// certificate's identity as JSON, matched again against the rule's identities when the cache
// answers.
const keylessHint = "keyless:"

func signerHints(signers []sign.CertSigner) []string {
	var out []string
	for _, s := range signers {
		if js, err := json.Marshal(s); err == nil {
			out = append(out, keylessHint+string(js))
		}
	}
	return out
}

// Resolved is one version's index, resolved and verified once, with the platform
// manifests fetched so far (each once, by digest).
type Resolved struct {
	src  *OCI
	ref  oci.Ref
	once sync.Once
	err  error

	t    oci.Target
	v    *artifact.Version
	auth Authentication
	// signers are the keyless identities whose signatures checked out, for the cache's record.
	signers []sign.CertSigner

	mu        sync.Mutex
	platforms map[manifest.Platform]*artifact.Platform
	meta      *cache.VersionMeta // nil for a version named by digest: nothing to cache it under
}

func (rv *Resolved) load(ctx context.Context, addr manifest.ProviderAddress) error {
	s := rv.src
	t, err := s.target(ctx, rv.ref)
	if err != nil {
		return err
	}
	v, err := artifact.ResolveVersion(ctx, t, rv.ref)
	if err != nil {
		return oci.Explain("resolve "+addr.String(), rv.ref, err)
	}
	rv.t, rv.v = t, v
	rv.auth = Authentication{Method: "none", Subject: v.Index.Digest}
	if a, ok := s.verified.lookup(addr, rv.ref, v.Index.Digest); ok && s.policy != nil {
		rv.auth = a
	} else if s.policy != nil {
		d, err := s.policy.Check(ctx, t, rv.ref, v, addr.String(), sign.VerifyOptions{SignaturesOnly: true})
		if err != nil {
			return fmt.Errorf("%s %s: %w", addr, v.Version, err)
		}
		rv.auth.Rule = d.Rule
		if d.Warning != nil {
			rv.auth.Warning = d.Warning.Error()
			s.env.warn(addr, v.Version, rv.auth.Warning)
		}
		if d.Result != nil {
			rv.auth.Method = "cosign"
			for _, sig := range d.Result.Signatures {
				rv.auth.Keys = append(rv.auth.Keys, sig.By())
				if sig.Signer != nil {
					rv.signers = append(rv.signers, *sig.Signer)
				}
			}
		}
		s.verified.remember(addr, rv.ref, rv.auth)
	}
	if rv.ref.IsDigest() {
		return nil
	}
	rv.meta = &cache.VersionMeta{Repository: rv.ref.Repo(), Tag: rv.ref.Reference, Version: v.Version, Index: v.Index.Digest, Platforms: map[string]*cache.PlatformMeta{}, VerifiedKeys: rv.auth.Keys}
	if d := rv.auth; d.Method == "cosign" {
		rv.meta.Verified = append(keyHints(s.policy, rv.ref, addr, d.Keys), signerHints(rv.signers)...)
	}
	old, _ := s.env.Cache.ReadMeta(rv.ref, rv.ref.Reference)
	for _, e := range v.Parsed.Entries {
		// The index's h1: annotation, when it has one, lets a lock do without the zip; it is
		// checked against the zip whenever the zip is fetched.
		pm := &cache.PlatformMeta{Manifest: e.Descriptor.Digest, H1: e.H1}
		if old != nil && old.Index == v.Index.Digest {
			if op := old.Platforms[e.Platform.String()]; op != nil && op.Manifest == pm.Manifest {
				pm = op // what an earlier command learnt of the same bytes, h1 included
			}
		}
		rv.meta.Platforms[e.Platform.String()] = pm
	}
	return s.env.Cache.WriteMeta(rv.ref, rv.meta)
}

// keyHints gives the sigstore hints of the keys (by name) of the rule that verified a version.
func keyHints(p *sign.Policy, ref oci.Ref, addr manifest.ProviderAddress, names []string) []string {
	r := p.Match(ref.Repo(), addr.String())
	if r == nil {
		return nil
	}
	var out []string
	for _, k := range r.Keys {
		for _, n := range names {
			if k.Name == n {
				out = append(out, k.Hint)
			}
		}
	}
	return out
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
		if pm.Zip != "" && pm.Zip != p.Zip.Digest {
			pm.H1 = e.H1 // what was learnt of another zip does not hold for this one
		}
		pm.Zip, pm.Size, pm.Filename = p.Zip.Digest, p.Zip.Size, p.Filename
		if err := rv.src.env.Cache.WriteMeta(rv.ref, rv.meta); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// PackageFor gives one platform's package of the resolved version.
func (rv *Resolved) PackageFor(ctx context.Context, addr manifest.ProviderAddress, platform manifest.Platform) (*Package, error) {
	p, err := rv.platform(ctx, platform)
	if err != nil {
		return nil, err
	}
	pkg := &Package{
		Addr: addr, Version: rv.v.Version, Platform: platform, Filename: p.Filename, Zip: p.Zip.Digest, Size: p.Zip.Size, Auth: rv.auth,
		Fetch: func(ctx context.Context, w io.Writer, progress oci.Progress) error {
			return artifact.FetchZip(ctx, rv.t, p, w, progress)
		},
	}
	if rv.meta != nil {
		rv.mu.Lock()
		pm := rv.meta.Platforms[platform.String()]
		pkg.H1 = pm.H1
		rv.mu.Unlock()
		pkg.RecordH1 = func(h1 string) error {
			rv.mu.Lock()
			defer rv.mu.Unlock()
			pm.H1 = h1
			return rv.src.env.Cache.WriteMeta(rv.ref, rv.meta)
		}
	}
	return pkg, nil
}

// zipDescriptor rebuilds a cached platform's zip descriptor.
func zipDescriptor(pm *cache.PlatformMeta) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: manifest.MediaTypeZip, Digest: pm.Zip, Size: pm.Size}
}
