package bundle

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/pkg/cache"
	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/publish"
	"github.com/oprov/oprov/pkg/source"
)

// streamOrigin streams one origin provider version's zips straight into the tarball, one pass
// per zip: each streams from the origin into its blob's place in the tarball, hashed on the way
// and checked against the signed SHA256SUMS (whose signature planConfig checked before any
// download), then is read back where it landed for the checks 'oprov push' makes (the provider
// executable, no escaping path) and its h1: (in checks: see streamBlob). Once checks pass,
// publishOrigin publishes the release it gives.
func streamOrigin(ctx context.Context, p *planned, tl *tarLayout, opts ConfigOptions, checks *errgroup.Group) (*providerrelease.Release, error) {
	if sc, ok := p.src.(source.Screener); ok {
		if _, err := sc.Screen(ctx, p.addr, versions.List{p.version}, nil); err != nil {
			return nil, err
		}
	}
	// Checks write into the artifacts as they finish: the slice must never move.
	rel := &providerrelease.Release{Version: p.version.String(), Artifacts: make([]providerrelease.Artifact, 0, len(p.platforms))}
	for _, pl := range p.platforms {
		pkg, err := p.src.PackageFor(ctx, p.addr, p.version, pl)
		if err != nil {
			return nil, err
		}
		name, err := providerrelease.ParseFilename(pkg.Filename)
		if err != nil {
			return nil, fmt.Errorf("the origin's file name: %w", err)
		}
		if name.Version != rel.Version || name.Platform != pl || rel.Type != "" && name.Type != rel.Type {
			return nil, fmt.Errorf("the origin names its %s package %s, which is not version %s for %s", pl, pkg.Filename, rel.Version, pl)
		}
		rel.Type, p.evidence = name.Type, pkg.Auth.Evidence
		rel.Artifacts = append(rel.Artifacts, providerrelease.Artifact{Name: name, Digest: pkg.Zip})
		if err := streamZip(ctx, tl, pkg, &rel.Artifacts[len(rel.Artifacts)-1], opts.Progress, checks); err != nil {
			return nil, fmt.Errorf("%s: %w", pkg.Filename, err)
		}
	}
	return rel, nil
}

// publishOrigin publishes a streamed origin release into the tarball as 'oprov mirror' publishes
// it (the same index, byte for byte), with the SHA256SUMS evidence attached. A version its base
// already holds stays out, tags and all.
func publishOrigin(ctx context.Context, p *planned, rel *providerrelease.Release, tl *tarLayout, base map[digest.Digest]bool) error {
	sort.SliceStable(rel.Artifacts, func(i, j int) bool { return rel.Artifacts[i].Name.Platform.Less(rel.Artifacts[j].Name.Platform) })
	ev := p.evidence
	tag := p.listed.Repository + ":" + p.listed.Tag
	res, err := publish.Release(ctx, tl, ociref.Ref{Reference: tag}, rel, publish.Options{})
	if err != nil {
		return err
	}
	p.listed.Index, p.listed.InBundle = res.Index.Digest.String(), !base[res.Index.Digest]
	if !p.listed.InBundle {
		tl.untag(tag)
		return nil
	}
	if ev == nil {
		return nil
	}
	d, err := referrers.Attach(ctx, tl, res.Index, ev.ArtifactType, ev.Files, ev.Annotations)
	if err != nil {
		return fmt.Errorf("attaching the origin's SHA256SUMS evidence: %w", err)
	}
	return recordReferrers(ctx, tl, p.listed.Repository, []ocispec.Descriptor{d})
}

// streamZip streams one origin package into the tarball (see streamOrigin); a's size is set
// then, its executable and h1: once checks pass.
func streamZip(ctx context.Context, tl *tarLayout, pkg *cache.Package, a *providerrelease.Artifact, progress ociref.Progress, checks *errgroup.Group) error {
	fetch := func(w io.Writer) error { return pkg.Fetch(ctx, w, progress) }
	check := func(r io.ReaderAt, size int64) error {
		zr, err := zip.NewReader(r, size)
		if err != nil {
			return fmt.Errorf("%s %s: %s is not a valid zip: %w", pkg.Addr, pkg.Version, pkg.Filename, err)
		}
		if a.Executable, err = providerrelease.CheckZip(zr, a.Name); err != nil {
			return fmt.Errorf("%s %s: %s: %w", pkg.Addr, pkg.Version, pkg.Filename, err)
		}
		if a.H1, err = pkghash.ReaderH1(ctx, zr); err != nil {
			return fmt.Errorf("%s %s: h1 hash of %s: %w", pkg.Addr, pkg.Version, pkg.Filename, err)
		}
		return nil
	}
	size, err := tl.streamBlob(pkg.Zip, fetch, check, checks)
	a.Size = size
	return err
}
