package origin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/apparentlymart/go-versions/versions"
	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// Source is an origin provider registry (Provider Registry Protocol v1) as a source.Source.
// A version's packages are authenticated by the OpenPGP signature over its SHA256SUMS, checked
// once per version with the keys the origin lists (or the pinned ones); each zip is checked
// against SHA256SUMS as it streams in.
type Source struct {
	registry *oci.Client
	trusted  openpgp.EntityList

	mu       sync.Mutex
	origins  map[string]*Client
	offered  map[string][]Version      // by address
	releases map[string]*originRelease // by address@version
}

// originRelease is one version's download answers and its checked SHA256SUMS.
type originRelease struct {
	once      sync.Once
	err       error
	downloads map[manifest.Platform]*Download
	signed    *signedSums
	origin    *Client
}

// NewSource gives the source for origin registries, with registry's TLS policy. Trusted, when
// set, pins the OpenPGP keys allowed to sign SHA256SUMS; otherwise the keys the origin lists for
// each download are used.
func NewSource(registry *oci.Client, trusted openpgp.EntityList) *Source {
	return &Source{registry: registry, trusted: trusted, origins: map[string]*Client{}, offered: map[string][]Version{}, releases: map[string]*originRelease{}}
}

func (s *Source) ForDisplay(addr manifest.ProviderAddress) string {
	return "https://" + addr.Hostname.String() + " (" + addr.Namespace + "/" + addr.Type + ")"
}

func (s *Source) origin(ctx context.Context, host string) (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.origins[host]; o != nil {
		return o, nil
	}
	o, err := newClient(ctx, host, s.registry)
	if err != nil {
		return nil, err
	}
	s.origins[host] = o
	return o, nil
}

func (s *Source) versionsOf(ctx context.Context, addr manifest.ProviderAddress) ([]Version, *Client, error) {
	o, err := s.origin(ctx, addr.Hostname.String())
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	all, ok := s.offered[addr.String()]
	s.mu.Unlock()
	if ok {
		return all, o, nil
	}
	if all, err = o.Versions(ctx, addr.Namespace, addr.Type); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	s.offered[addr.String()] = all
	s.mu.Unlock()
	return all, o, nil
}

func (s *Source) AvailableVersions(ctx context.Context, addr manifest.ProviderAddress) (versions.List, error) {
	all, _, err := s.versionsOf(ctx, addr)
	if err != nil {
		return nil, err
	}
	var list versions.List
	for _, v := range all {
		if pv, err := versions.ParseVersion(v.Version); err == nil {
			list = append(list, pv)
		}
	}
	return list, nil
}

// offeredVersion finds what the origin said of one version.
func (s *Source) offeredVersion(ctx context.Context, addr manifest.ProviderAddress, version versions.Version) (Version, *Client, error) {
	all, o, err := s.versionsOf(ctx, addr)
	if err != nil {
		return Version{}, nil, err
	}
	for _, v := range all {
		if pv, err := versions.ParseVersion(v.Version); err == nil && pv.Same(version) {
			return v, o, nil
		}
	}
	return Version{}, nil, fmt.Errorf("%s does not offer %s %s", addr.Hostname, addr, version)
}

// Screen leaves out the versions whose plugin protocols oprov cannot launch (see launchable).
func (s *Source) Screen(ctx context.Context, addr manifest.ProviderAddress, list versions.List, warn func(string)) (versions.List, error) {
	var chosen []Version
	for _, v := range list {
		ov, _, err := s.offeredVersion(ctx, addr, v)
		if err != nil {
			return nil, err
		}
		chosen = append(chosen, ov)
	}
	kept, err := launchable(chosen, warn)
	if err != nil {
		return nil, err
	}
	out := make(versions.List, len(kept))
	for i, v := range kept {
		out[i], _ = versions.ParseVersion(v.Version)
	}
	return out, nil
}

func (s *Source) Platforms(ctx context.Context, addr manifest.ProviderAddress, version versions.Version) ([]manifest.Platform, error) {
	v, _, err := s.offeredVersion(ctx, addr, version)
	if err != nil {
		return nil, err
	}
	return append([]manifest.Platform(nil), v.Platforms...), nil
}

// release asks where every platform's package of a version is and checks the signed
// SHA256SUMS, once per version.
func (s *Source) release(ctx context.Context, addr manifest.ProviderAddress, version versions.Version) (*originRelease, error) {
	key := addr.String() + "@" + version.String()
	s.mu.Lock()
	r := s.releases[key]
	if r == nil {
		r = &originRelease{}
		s.releases[key] = r
	}
	s.mu.Unlock()
	r.once.Do(func() { r.err = r.load(ctx, s, addr, version) })
	return r, r.err
}

func (r *originRelease) load(ctx context.Context, s *Source, addr manifest.ProviderAddress, version versions.Version) error {
	v, o, err := s.offeredVersion(ctx, addr, version)
	if err != nil {
		return err
	}
	r.origin, r.downloads = o, map[manifest.Platform]*Download{}
	var list []*Download
	for _, p := range v.Platforms {
		d, err := o.Download(ctx, addr.Namespace, addr.Type, v.Version, p)
		if err != nil {
			return err
		}
		if err := checkProtocols(v.Version, d.Protocols); err != nil {
			return fmt.Errorf("the %s download answer: %w (nothing was pushed)", p, err)
		}
		r.downloads[p] = d
		list = append(list, d)
	}
	if len(list) == 0 {
		return fmt.Errorf("%s %s: the origin lists no platforms", addr, version)
	}
	r.signed, err = fetchSignedSums(ctx, o, list, s.trusted)
	return err
}

func (s *Source) PackageFor(ctx context.Context, addr manifest.ProviderAddress, version versions.Version, platform manifest.Platform) (*cache.Package, error) {
	r, err := s.release(ctx, addr, version)
	if err != nil {
		return nil, err
	}
	d := r.downloads[platform]
	if d == nil {
		return nil, fmt.Errorf("the origin offers no %s package", platform)
	}
	if _, err := providerrelease.ParseFilename(d.Filename); err != nil {
		return nil, fmt.Errorf("the origin's file name: %w", err)
	}
	u, err := d.Resolve(d.DownloadURL)
	if err != nil {
		return nil, err
	}
	want := strings.ToLower(r.signed.sums[d.Filename])
	return &cache.Package{
		Addr: addr, Version: version.String(), Platform: platform, Filename: d.Filename,
		Zip: digest.NewDigestFromEncoded(digest.SHA256, want), Size: -1, MaxSize: r.origin.reg.Bounds().MaxPackageSize,
		Auth: cache.Authentication{Method: "gpg", Keys: []string{r.signed.keyID}, Evidence: r.signed.evidence(addr, version.String())},
		Fetch: func(ctx context.Context, w io.Writer, progress oci.Progress) error {
			h := sha256.New()
			dst := &progressWriter{w: io.MultiWriter(w, h), p: progress, to: w}
			limits := r.origin.reg.Bounds()
			if n, err := r.origin.Fetch(ctx, u, dst, limits.MaxPackageSize); n > limits.MaxPackageSize {
				return &oci.LimitError{What: "the origin's " + d.Filename + " package goes on", Limit: "the maximum package size of " + oci.FormatSize(limits.MaxPackageSize), Setting: oci.SettingMaxPackageSize}
			} else if err != nil {
				return err
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				return fmt.Errorf("%s does not match the signed SHA256SUMS: it has sha256 %s, SHA256SUMS says %s (nothing was pushed)", d.Filename, got, want)
			}
			return nil
		},
	}, nil
}

// progressWriter passes a download to w (and its hash), advancing p (when set), and tells the
// writer it fetches into (to), when that wants it, how large the download is.
type progressWriter struct {
	w       io.Writer
	p       oci.Progress
	to      io.Writer
	planned atomic.Bool
}

// ExpectSize plans the download's bytes, once: without it, bytes downloaded would count against
// the push's plan and the display would pass 100%.
func (pw *progressWriter) ExpectSize(n int64) {
	if !pw.planned.CompareAndSwap(false, true) {
		return
	}
	if e, ok := pw.to.(interface{ ExpectSize(int64) }); ok {
		e.ExpectSize(n)
	}
	if pw.p != nil {
		pw.p.Plan(n)
	}
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	if pw.p != nil {
		pw.p.Advance(int64(n))
	}
	return n, err
}
