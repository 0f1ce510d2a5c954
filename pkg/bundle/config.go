package bundle

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/apparentlymart/go-versions/versions"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifactcopy"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/module"
	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/origin"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// listingName is the listing's file in a configuration bundle's tarball (beside the OCI layout),
// and the suffix of the copy written beside the tarball (OUT.listing.json).
const listingName = "oprov-bundle.json"

// listingFormat names the listing's format.
const listingFormat = "oprov-bundle/v1"

// Listing says what a configuration bundle holds: one entry a provider, and the digest of every
// blob a registry holds once it is loaded (Blobs: its own and, for a delta, its base's). A delta
// bundle leaves out every blob its base had (Omitted: load reads them from where the base was
// loaded). The listing of an earlier bundle is all a delta needs.
type Listing struct {
	Format    string           `json:"format"`
	Providers []ListedProvider `json:"providers"`
	Modules   []ListedModule   `json:"modules,omitempty"`
	Blobs     []string         `json:"blobs"`
	Omitted   []string         `json:"omitted,omitempty"`
	Base      string           `json:"base,omitempty"` // the listing a delta was made against
}

// ListedProvider is one provider version in a bundle.
type ListedProvider struct {
	Address     string   `json:"address"`
	Version     string   `json:"version"`
	VersionFrom string   `json:"version_from"` // "lock file", or "highest matching CONSTRAINTS"
	From        string   `json:"from"`         // "oci" (oprov.hcl's repository) or "origin"
	Source      string   `json:"source"`       // the repository or origin it was taken from
	Repository  string   `json:"repository"`   // in the bundle: HOST/NAMESPACE/TYPE
	Tag         string   `json:"tag"`
	Index       string   `json:"index_digest"`
	Platforms   []string `json:"platforms"`
	Evidence    string   `json:"evidence"` // what authenticated it
	// InBundle is false for a version a delta left out: its base holds it unchanged.
	InBundle bool `json:"in_bundle"`
}

// repositoryFor is a provider's repository path in a bundle, and below a load's destination:
// its full address, so providers of two origins cannot collide.
func repositoryFor(addr manifest.ProviderAddress) string {
	return hostComponent(addr.Hostname.String()) + "/" + addr.Namespace + "/" + addr.Type
}

// hostComponent is a provider hostname as a repository path component: a port's colon, which
// no repository path may hold, becomes "_", which no hostname holds, so none can collide.
func hostComponent(host string) string { return strings.ReplaceAll(host, ":", "_") }

// Want is one provider a configuration requires, as its files say (the loader reads them): its
// constraints, the lock file's entry, and the OCI repository oprov.hcl maps it to, if any.
type Want struct {
	Addr        manifest.ProviderAddress
	Constraints string // joined, as the lock file records them
	// Locked is the lock file's version and hashes; "" when the lock has no entry.
	LockedVersion string
	LockedHashes  []string
	// OCI, when set, is where oprov.hcl maps the provider, under its policy; nil means its origin.
	OCI *OCIFrom
}

// OCIFrom is an OCI repository mapping (an oci_mirror block): one source for every provider it
// maps, its repository per address, its policy.
type OCIFrom struct {
	Policy  *sign.Policy
	RepoFor func(manifest.ProviderAddress) (ociref.Ref, error)
}

// ConfigOptions say which configuration to bundle, and how.
type ConfigOptions struct {
	Dir       string              // the configuration directory, for messages
	Wants     []Want              // what it requires, sorted by address
	Platforms []manifest.Platform // empty: those the lock file records
	Registry  *ociref.Client
	// TrustedKeys, when set, pins the OpenPGP keys allowed to sign origins' SHA256SUMS.
	TrustedKeys openpgp.EntityList
	Base        *Listing // when set, blobs it lists are left out
	Progress    ociref.Progress
	Log         io.Writer
	// Cache keeps what OCI sources learn of each version (the same cache install uses).
	Cache *cache.Cache
	// Modules are the configuration's remote module calls, resolved (module.Walk); each goes
	// into the bundle as a module package, checked against ModuleLock (nil: no lock).
	Modules    []*module.Resolved
	ModuleLock *module.Lock
}

// planned is one provider resolved before anything is downloaded.
type planned struct {
	addr      manifest.ProviderAddress
	version   versions.Version
	from      string
	src       source.Source
	oci       *OCIFrom
	platforms []manifest.Platform
	listed    ListedProvider
	evidence  *cache.Evidence // an origin version's, for publishOrigin
}

// SaveConfig writes one tarball holding every provider a configuration requires (root and local
// modules): those oprov.hcl maps to OCI repositories copied from there with their signatures
// (verified under the block's policy), every other one from its origin registry with its
// SHA256SUMS signature checked and attached. Every provider, version and platform is resolved and
// authenticated before anything is downloaded: a provider no source can supply, a platform a
// provider lacks, or a signature that fails stops the save before anything is written.
func SaveConfig(ctx context.Context, opts ConfigOptions, out string) (*Listing, error) {
	if opts.Registry == nil {
		opts.Registry = ociref.NewClient(ociref.Options{})
	}
	if len(opts.Wants) == 0 && len(opts.Modules) == 0 {
		return nil, fmt.Errorf("%s requires no provider (no required_providers in it or its local modules)", opts.Dir)
	}
	plan, err := planConfig(ctx, opts)
	if err != nil {
		return nil, err
	}

	work, err := scratch.Beside(filepath.Dir(out))
	if err != nil {
		return nil, err
	}
	defer work.Release()
	listing := &Listing{Format: listingFormat}
	base := map[digest.Digest]bool{}
	if opts.Base != nil {
		listing.Base, listing.Omitted = opts.Base.Format, opts.Base.Blobs
		for _, b := range opts.Base.Blobs {
			base[digest.Digest(b)] = true
		}
	}
	srcs, err := openAll(ctx, plan, opts, base, listing)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = work.WriteFile(out, func(w io.Writer) error {
		data, err = writeConfigTar(ctx, w, work.Path, plan, srcs, base, opts, listing)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(out+".listing.json", data, 0o644); err != nil {
		return nil, err
	}
	return listing, nil
}

// openAll opens every planned OCI provider's source and resolves its tag; a version the base
// holds as it is stays out of the bundle, tags and all. Origin providers are streamed into the
// tarball (streamOrigin), which is where their index digest is learnt.
func openAll(ctx context.Context, plan []*planned, opts ConfigOptions, base map[digest.Digest]bool, listing *Listing) ([]ociref.ReadOnly, error) {
	srcs := make([]ociref.ReadOnly, len(plan))
	for i, p := range plan {
		if p.oci == nil {
			continue
		}
		src, err := openPlanned(ctx, p, opts)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", p.addr, p.version, err)
		}
		d, err := src.Resolve(ctx, p.listed.Tag)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", p.addr, p.version, err)
		}
		p.listed.Index, p.listed.InBundle = d.Digest.String(), !base[d.Digest]
		srcs[i] = src
	}
	return srcs, nil
}

// writeConfigTar streams every planned provider the bundle holds into the tarball w, then the
// listing (with every blob a registry holds once this bundle is loaded on its base: the next
// delta's base), and gives the listing's bytes.
func writeConfigTar(ctx context.Context, w io.Writer, spill string, plan []*planned, srcs []ociref.ReadOnly, base map[digest.Digest]bool, opts ConfigOptions, listing *Listing) ([]byte, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	pos := &iox.CountingWriter{W: bw}
	tl, err := newTarLayout(ctx, pos)
	if err != nil {
		return nil, err
	}
	tl.skip, tl.spill = base, spill
	if ra, ok := w.(io.ReaderAt); ok {
		tl.back = &readBack{flush: bw.Flush, at: ra, pos: pos}
	}
	if err := writeProviders(ctx, tl, plan, srcs, base, opts, listing); err != nil {
		return nil, err
	}
	all := map[string]bool{}
	for _, b := range opts.baseBlobs() {
		all[b] = true
	}
	for _, d := range tl.pushed() {
		all[d.String()] = true
	}
	for b := range all {
		listing.Blobs = append(listing.Blobs, b)
	}
	sort.Strings(listing.Blobs)
	data, err := json.MarshalIndent(listing, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	if err := tl.addFile(listingName, data); err != nil {
		return nil, err
	}
	if err := tl.Close(); err != nil {
		return nil, err
	}
	return data, bw.Flush()
}

// writeProviders streams every planned provider the bundle holds into tl (origin ones from
// their origin, OCI ones copied with their referrers) and lists each. It fails when a delta
// would hold nothing new.
func writeProviders(ctx context.Context, tl *tarLayout, plan []*planned, srcs []ociref.ReadOnly, base map[digest.Digest]bool, opts ConfigOptions, listing *Listing) error {
	rels, err := streamOrigins(ctx, plan, tl, opts)
	if err != nil {
		return err
	}
	changed := 0
	for i, p := range plan {
		var err error
		switch {
		case p.oci == nil:
			err = publishOrigin(ctx, p, rels[i], tl, base)
		case p.listed.InBundle:
			err = copyPlanned(ctx, p, srcs[i], tl, opts)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", p.addr, p.version, err)
		}
		if p.listed.InBundle {
			changed++
		}
		listing.Providers = append(listing.Providers, p.listed)
	}
	n, err := saveModules(ctx, tl, opts, base, listing)
	if err != nil {
		return err
	}
	if changed += n; opts.Base != nil && changed == 0 {
		return errors.New("nothing changed since the base bundle: no bundle written")
	}
	return nil
}

// streamOrigins streams every origin provider's zips into tl, one after another (a tar has one
// writer), each read back and checked beside the next download; it gives each one's release
// once every check has passed.
func streamOrigins(ctx context.Context, plan []*planned, tl *tarLayout, opts ConfigOptions) ([]*providerrelease.Release, error) {
	rels := make([]*providerrelease.Release, len(plan))
	checks, cctx := errgroup.WithContext(ctx)
	checks.SetLimit(2)
	for i, p := range plan {
		if p.oci != nil {
			continue
		}
		rel, err := streamOrigin(cctx, p, tl, opts, checks)
		if err != nil {
			checks.Wait()
			return nil, fmt.Errorf("%s %s: %w", p.addr, p.version, err)
		}
		rels[i] = rel
	}
	if err := checks.Wait(); err != nil {
		return nil, err
	}
	return rels, nil
}

// planConfig resolves every required provider: its source, version, platforms and each
// platform's package (which authenticates it: an origin's signed SHA256SUMS, an OCI version's
// signature under the policy).
func planConfig(ctx context.Context, opts ConfigOptions) ([]*planned, error) {
	env := &source.Env{Cache: opts.Cache, Registry: opts.Registry, Log: opts.Log}
	originSrc := origin.NewSource(opts.Registry, opts.TrustedKeys)
	ociSrcs := map[*OCIFrom]source.Source{}
	var plan []*planned
	for _, w := range opts.Wants {
		p := &planned{addr: w.Addr, from: "origin", src: originSrc}
		if m := w.OCI; m != nil {
			if ociSrcs[m] == nil {
				ociSrcs[m] = source.NewOCI(env, m.Policy, m.RepoFor)
			}
			p.from, p.src, p.oci = "oci", ociSrcs[m], m
		}
		if err := planOne(ctx, p, w, opts); err != nil {
			return nil, fmt.Errorf("%s: %w (nothing was written)", w.Addr, err)
		}
		plan = append(plan, p)
	}
	return plan, nil
}

func planOne(ctx context.Context, p *planned, w Want, opts ConfigOptions) error {
	if w.LockedVersion != "" {
		v, err := versions.ParseVersion(w.LockedVersion)
		if err != nil {
			return fmt.Errorf("the lock file's version %q: %w", w.LockedVersion, err)
		}
		p.version, p.listed.VersionFrom = v, "lock file"
	} else {
		set, err := manifest.Constraints(w.Constraints)
		if err != nil {
			return err
		}
		all, err := p.src.AvailableVersions(ctx, p.addr)
		if err != nil {
			return err
		}
		match := all.Filter(set)
		if len(match) == 0 {
			return fmt.Errorf("%s offers no version that meets %q", p.src.ForDisplay(p.addr), w.Constraints)
		}
		p.version = match.Newest()
		c := w.Constraints
		if c == "" {
			c = "any version"
		}
		p.listed.VersionFrom = "highest matching " + c + " (no lock entry)"
	}
	offered, err := p.src.Platforms(ctx, p.addr, p.version)
	if err != nil {
		return err
	}
	want := opts.Platforms
	if len(want) == 0 {
		if want, err = lockedPlatforms(ctx, p, w.LockedHashes, offered); err != nil {
			return err
		}
	}
	has := map[manifest.Platform]bool{}
	for _, o := range offered {
		has[o] = true
	}
	evidence := ""
	for _, pl := range want {
		if !has[pl] {
			return fmt.Errorf("version %s has no %s package (%s offers: %s)", p.version, pl, p.src.ForDisplay(p.addr), platformNames(offered))
		}
		pkg, err := p.src.PackageFor(ctx, p.addr, p.version, pl)
		if err != nil {
			return err
		}
		evidence = describeAuth(pkg.Auth)
	}
	p.platforms = want
	tag, err := manifest.VersionToTag(p.version.String())
	if err != nil {
		return err
	}
	p.listed.Address, p.listed.Version, p.listed.From = p.addr.String(), p.version.String(), p.from
	p.listed.Source, p.listed.Repository, p.listed.Tag = p.src.ForDisplay(p.addr), repositoryFor(p.addr), tag
	p.listed.Platforms, p.listed.Evidence = platformNames(want), evidence
	return nil
}

// lockedPlatforms are the platforms whose package the lock entry records: by its zh: hash, or by
// its h1: hash where the source knows it without the zip (an OCI index's h1 annotation).
func lockedPlatforms(ctx context.Context, p *planned, locked []string, offered []manifest.Platform) ([]manifest.Platform, error) {
	if locked == nil {
		return nil, errors.New("no lock entry records its platforms: give --platform")
	}
	var out []manifest.Platform
	for _, o := range offered {
		pkg, err := p.src.PackageFor(ctx, p.addr, p.version, o)
		if err != nil {
			return nil, err
		}
		if slices.Contains(locked, pkghash.ZH(pkg.Zip.Encoded())) || pkg.H1 != "" && slices.Contains(locked, pkg.H1) {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the lock file records no hash of any %s %s package this source knows: give --platform", p.addr, p.version)
	}
	return out, nil
}

func describeAuth(a cache.Authentication) string {
	s := a.Method
	if len(a.Keys) > 0 {
		s += " (" + strings.Join(a.Keys, ", ") + ")"
	}
	return s
}

func platformNames(ps []manifest.Platform) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	sort.Strings(out)
	return out
}

// openPlanned opens the repository a planned OCI provider is copied from.
func openPlanned(ctx context.Context, p *planned, opts ConfigOptions) (ociref.ReadOnly, error) {
	ref, err := p.oci.RepoFor(p.addr)
	if err != nil {
		return nil, err
	}
	src, err := opts.Registry.Open(ctx, ref, false)
	if err != nil {
		return nil, ociref.Explain("save", ref, err)
	}
	return src, nil
}

// copyPlanned streams one provider version, with its referrers (signatures, SHA256SUMS
// evidence), into the tarball, tagged REPOSITORY:TAG.
func copyPlanned(ctx context.Context, p *planned, src ociref.ReadOnly, tl *tarLayout, opts ConfigOptions) error {
	repo := p.listed.Repository
	var found []ocispec.Descriptor
	_, err := artifactcopy.Copy(ctx, src, tl, []string{p.listed.Tag}, artifactcopy.Options{
		Progress:  opts.Progress,
		SizesOnly: true, // the tarball hashes each blob as it goes in
		DstTag:    func(t string) string { return repo + ":" + t },
		Referrer:  func(d ocispec.Descriptor) { found = append(found, d) },
	})
	if err != nil {
		return err
	}
	return recordReferrers(ctx, tl, repo, found)
}

func (o ConfigOptions) baseBlobs() []string {
	if o.Base == nil {
		return nil
	}
	return o.Base.Blobs
}

// errNoListing says a tarball holds no listing: it is not a configuration bundle.
var errNoListing = errors.New("not a configuration bundle")

// ReadListing reads a bundle's listing: from a listing file (.json), or from inside a bundle's
// tarball, whose every entry is checked first (checkTarball). Either is read only up to the
// listing's bound.
func ReadListing(ctx context.Context, path string, limits ociref.Limits) (*Listing, error) {
	if !strings.HasSuffix(path, ".json") {
		if err := checkTarball(ctx, path, limits.MaxPackageSize); err != nil {
			return nil, err
		}
		return readListingTar(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readBounded(f, maxListingSize, path)
	if err != nil {
		return nil, err
	}
	return parseListing(path, data)
}

// readListingTar reads the listing inside a tarball checkTarball has passed.
func readListingTar(path string) (*Listing, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s holds no %s: it is %w", path, listingName, errNoListing)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") == listingName {
			data, err := readBounded(tr, maxListingSize, path+": "+listingName)
			if err != nil {
				return nil, err
			}
			return parseListing(path, data)
		}
	}
}

func parseListing(path string, data []byte) (*Listing, error) {
	var l Listing
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if l.Format != listingFormat {
		return nil, fmt.Errorf("%s: listing format %q, want %q", path, l.Format, listingFormat)
	}
	return &l, nil
}

// hostGroups are a listing's addresses by hostname, hostnames sorted.
func (l *Listing) hostGroups() ([]string, map[string][]string) {
	groups := map[string][]string{}
	for _, a := range l.Addresses() {
		host, _, _ := strings.Cut(a, "/")
		groups[host] = append(groups[host], a)
	}
	hosts := make([]string, 0, len(groups))
	for h := range groups {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts, groups
}

// Addresses are the providers a listing names, sorted.
func (l *Listing) Addresses() []string {
	var out []string
	for _, p := range l.Providers {
		out = append(out, p.Address)
	}
	sort.Strings(out)
	return out
}

// template is the repository template, below a load's destination, of one hostname's providers
// (an HCL 2 template's source: the destination's literal text escaped). The hostname is written
// out (one block a hostname) rather than left to ${hostname}, which cannot hold a port.
func template(to, host string) string {
	return tofufiles.TemplateLiteral(strings.TrimSuffix(to, "/")+"/"+hostComponent(host)) + "/${namespace}/${type}"
}

// TofuCLIConfig is the CLI configuration that installs a loaded configuration bundle's providers
// from below to, and every other provider as usual.
func (l *Listing) TofuCLIConfig(to string) *tofufiles.CLIConfig {
	in := &tofufiles.Installation{}
	hosts, groups := l.hostGroups()
	for _, h := range hosts {
		in.Methods = append(in.Methods, tofufiles.Method{Kind: tofufiles.OCIMirror, RepositoryTemplate: template(to, h), Include: groups[h]})
	}
	in.Methods = append(in.Methods, tofufiles.Method{Kind: tofufiles.Direct, Exclude: l.Addresses()})
	return &tofufiles.CLIConfig{Installation: in}
}

// PrintedTrust is what load verified with, for the printed oprov.hcl to verify with too: a
// policy file, or public keys and keyless identities (with their trusted root). Paths should be
// absolute: the printed blocks go into a file elsewhere.
type PrintedTrust struct {
	Policy      string
	PublicKeys  []string
	Identities  []sign.IdentityBlock
	TrustedRoot string
}

// OprovHCL is the oprov.hcl blocks that install (and verify, as trust says) a loaded
// configuration bundle's providers from below to.
func (l *Listing) OprovHCL(to string, trust PrintedTrust) string {
	var ids []tofufiles.Identity
	for _, id := range trust.Identities {
		ids = append(ids, tofufiles.Identity{Issuer: id.Issuer, IssuerRegexp: id.IssuerRegexp, Subject: id.Subject,
			SubjectRegexp: id.SubjectRegexp, Repository: id.Repository, Ref: id.Ref, Trigger: id.Trigger})
	}
	var mirrors []tofufiles.OprovMirror
	hosts, groups := l.hostGroups()
	for _, h := range hosts {
		mirrors = append(mirrors, tofufiles.OprovMirror{RepositoryTemplate: template(to, h), Include: groups[h],
			Policy: trust.Policy, PublicKeys: trust.PublicKeys, Identities: ids, TrustedRoot: trust.TrustedRoot})
	}
	prefix := ""
	if len(l.Modules) > 0 {
		prefix = strings.TrimSuffix(to, "/")
	}
	return tofufiles.OprovHCL(mirrors, prefix)
}
