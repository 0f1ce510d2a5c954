// Package mirror publishes providers from any Source (an origin registry, most often: see
// pkg/origin) in OpenTofu's OCI format, one version at a time, with the source's evidence (an
// origin's signed SHA256SUMS) attached to each copied index; versions already mirrored with
// identical digests are skipped.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
	"github.com/oprov/oprov/pkg/origin"
	"github.com/oprov/oprov/pkg/publish"
	"github.com/oprov/oprov/pkg/source"
)

// Options say what to mirror where.
type Options struct {
	Address    manifest.ProviderAddress // on the origin
	Constraint string                   // versions to mirror ("" for all)
	Platforms  []manifest.Platform      // empty for every platform the origin offers
	To         oci.Ref
	Registry   *oci.Client // TLS policy and limits for the origin and the destination
	// TrustedKeys, when set, pins the OpenPGP keys allowed to sign SHA256SUMS; otherwise the keys
	// the origin lists for each download are used.
	TrustedKeys openpgp.EntityList
	Progress    oci.Progress
	// Warn, when set, is told of each version left out of a range because oprov cannot launch
	// its plugin protocols.
	Warn func(msg string)
	// TempDir holds downloads while they are checked (default: the system's), in a directory
	// owned by this process (see internal/scratch): a killed run's downloads go at the next run.
	TempDir string
}

// Mirrored is what mirroring did to one version.
type Mirrored struct {
	Version     string `json:"version"`
	Tag         string `json:"tag"`
	IndexDigest string `json:"index_digest"`
	Platforms   int    `json:"platform_count"`
	Skipped     bool   `json:"skipped"` // already mirrored with identical digests
	Uploaded    int    `json:"uploaded"`
	KeyID       string `json:"gpg_key_id"`
}

// Mirror copies the versions of a provider that meet the constraint from its origin registry to
// an OCI repository (MirrorFrom with an origin.Source). For each version it checks the OpenPGP
// signature of SHA256SUMS and every zip against SHA256SUMS before pushing anything; versions
// already mirrored with identical digests are skipped, and a run cut short resumes where it
// stopped (content already pushed is not sent again).
func Mirror(ctx context.Context, t oci.Target, opts Options) ([]Mirrored, error) {
	if opts.Registry == nil {
		opts.Registry = oci.NewClient(oci.Options{})
	}
	return MirrorFrom(ctx, t, origin.NewSource(opts.Registry, opts.TrustedKeys), opts)
}

// MirrorFrom copies the versions of opts.Address that meet opts.Constraint from any source into
// an OCI repository, one version at a time, oldest first, with the source's evidence (an
// origin's signed SHA256SUMS, say) attached to each copied index.
func MirrorFrom(ctx context.Context, t oci.Target, src source.Source, opts Options) ([]Mirrored, error) {
	set, err := manifest.Constraints(opts.Constraint)
	if err != nil {
		return nil, err
	}
	chosen, err := chooseVersions(ctx, src, set, opts)
	if err != nil {
		return nil, err
	}
	var out []Mirrored
	for _, v := range chosen {
		m, err := mirrorVersion(ctx, src, t, v, opts)
		if err != nil {
			return out, fmt.Errorf("%s %s: %w", opts.Address, v, err)
		}
		out = append(out, *m)
	}
	return out, nil
}

// chooseVersions picks the versions to mirror, oldest first: those that meet the constraint,
// less those the source screens out (an origin's versions oprov could not launch).
func chooseVersions(ctx context.Context, src source.Source, set versions.Set, opts Options) (versions.List, error) {
	all, err := src.AvailableVersions(ctx, opts.Address)
	if err != nil {
		return nil, err
	}
	chosen := all.Filter(set)
	if len(chosen) == 0 {
		var have []string
		for _, v := range all {
			have = append(have, v.String())
		}
		return nil, fmt.Errorf("%s offers no version of %s that meets %q (it has: %s)", opts.Address.Hostname, opts.Address, opts.Constraint, strings.Join(have, ", "))
	}
	chosen.Sort()
	sc, ok := src.(source.Screener)
	if !ok {
		return chosen, nil
	}
	warn := opts.Warn
	if warn != nil {
		warn = func(msg string) { opts.Warn(opts.Address.String() + ": " + msg) }
	}
	if chosen, err = sc.Screen(ctx, opts.Address, chosen, warn); err != nil {
		return nil, fmt.Errorf("%s: %w (nothing was pushed)", opts.Address, err)
	}
	return chosen, nil
}

// mirrorVersion mirrors one version: it asks the source for each platform's package (checking
// what authenticates them), skips the version if the destination already holds exactly these
// zips, downloads and checks every zip, and pushes them with the source's evidence attached.
func mirrorVersion(ctx context.Context, src source.Source, t oci.Target, v versions.Version, opts Options) (*Mirrored, error) {
	platforms, err := selectPlatforms(ctx, src, opts.Address, v, opts.Platforms)
	if err != nil {
		return nil, err
	}
	tag, err := manifest.VersionToTag(v.String())
	if err != nil {
		return nil, err
	}
	pkgs := make([]*cache.Package, len(platforms))
	for i, p := range platforms {
		if pkgs[i], err = src.PackageFor(ctx, opts.Address, v, p); err != nil {
			return nil, err
		}
	}
	res := &Mirrored{Version: v.String(), Tag: tag, Platforms: len(platforms)}
	if a := pkgs[0].Auth; a.Method == "gpg" && len(a.Keys) > 0 {
		res.KeyID = a.Keys[0]
	}
	ref := opts.To.WithReference(tag)
	if ok, digest, err := alreadyMirrored(ctx, t, ref, pkgs, opts.Registry.Bounds()); err != nil {
		return nil, err
	} else if ok {
		res.Skipped, res.IndexDigest = true, digest
		return res, nil
	}
	pushed, err := pushPackages(ctx, t, tag, pkgs, opts)
	if err != nil {
		return nil, oci.Explain("mirror", ref, err)
	}
	res.IndexDigest, res.Uploaded = pushed.Index.Digest.String(), pushed.Uploaded
	if ev := pkgs[0].Auth.Evidence; ev != nil {
		if _, err := referrers.Attach(ctx, t, pushed.Index, ev.ArtifactType, ev.Files, ev.Annotations); err != nil {
			return nil, oci.Explain("mirror", ref, fmt.Errorf("attaching the source's evidence: %w", err))
		}
	}
	return res, nil
}

// pushPackages downloads every package into a temporary directory (each checked as it streams
// in) and publishes them as one version, as 'oprov push' does.
func pushPackages(ctx context.Context, t oci.Target, tag string, pkgs []*cache.Package, opts Options) (*artifact.PushResult, error) {
	parent := opts.TempDir
	if parent == "" {
		parent = os.TempDir()
	}
	work, err := scratch.Beside(parent)
	if err != nil {
		return nil, err
	}
	defer work.Release()
	dir := work.Path
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(oci.DefaultConcurrency)
	paths := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		paths[i] = filepath.Join(dir, pkg.Filename)
		g.Go(func() error {
			return scratch.WriteFileAtomic(paths[i], func(w io.Writer) error { return pkg.Fetch(gctx, w, opts.Progress) })
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res, err := publish.Files(ctx, t, opts.To.WithReference(tag), paths, publish.Options{Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	return res.PushResult, nil
}

// selectPlatforms picks the platforms to mirror: those asked for, each of which the source must
// offer, or else every one it offers.
func selectPlatforms(ctx context.Context, src source.Source, addr manifest.ProviderAddress, v versions.Version, want []manifest.Platform) ([]manifest.Platform, error) {
	platforms, err := src.Platforms(ctx, addr, v)
	if err != nil {
		return nil, err
	}
	if len(want) > 0 {
		offered := map[manifest.Platform]bool{}
		for _, p := range platforms {
			offered[p] = true
		}
		platforms = nil
		for _, p := range want {
			if !offered[p] {
				return nil, fmt.Errorf("the origin offers no %s package", p)
			}
			platforms = append(platforms, p)
		}
	}
	manifest.SortPlatforms(platforms)
	return platforms, nil
}

// alreadyMirrored reports whether ref already holds exactly these zips.
func alreadyMirrored(ctx context.Context, t oci.Target, ref oci.Ref, pkgs []*cache.Package, limits oci.Limits) (bool, string, error) {
	v, err := artifact.ResolveVersion(ctx, t, ref, limits)
	if errors.Is(err, errdef.ErrNotFound) {
		return false, "", nil
	}
	if err != nil {
		return false, "", oci.Explain("mirror", ref, err)
	}
	entries := make([]manifest.Entry, len(pkgs))
	for i, pkg := range pkgs {
		e, ok := v.Parsed.Lookup(pkg.Platform)
		if !ok {
			return false, "", nil
		}
		entries[i] = e
	}
	platforms, err := artifact.FetchEntries(ctx, t, v, entries)
	if err != nil {
		return false, "", err
	}
	for i, p := range platforms {
		if p.Zip.Digest != pkgs[i].Zip {
			return false, "", fmt.Errorf("%s already holds a different %s package (%s, the origin's is %s): not overwriting it", ref, p.Platform, p.Zip.Digest, pkgs[i].Zip)
		}
	}
	return true, v.Index.Digest.String(), nil
}
