// Package artifact moves provider releases in OpenTofu's OCI format (format.md §1) between a
// release on disk and a repository: push a release as one version (zips, platform manifests,
// index, tag), resolve a version tag to its index, fetch platform manifests and zips by digest,
// pull, and list versions. Provider addresses are OpenTofu's own (registry-address).
package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// Version is a resolved provider version: its tag, its index (digest checked), and the index
// parsed.
type Version struct {
	Tag     string
	Version string
	Index   ocispec.Descriptor
	Parsed  *manifest.Index
	Type    string // provider type, from the repository name
}

// Platform is one platform of a version with its zip.
type Platform struct {
	Platform manifest.Platform
	Manifest ocispec.Descriptor
	Zip      ocispec.Descriptor
	Filename string
}

// ResolveVersion resolves a version tag (or a digest) to its index, fetches the index with its
// digest checked, and parses it strictly.
func ResolveVersion(ctx context.Context, t oci.ReadOnly, ref oci.Ref, l oci.Limits) (*Version, error) {
	if ref.Reference == "" {
		return nil, fmt.Errorf("%s: no version given (write %s:VERSION)", ref, ref)
	}
	if !ref.IsDigest() {
		if _, err := manifest.TagToVersion(ref.Reference); err != nil {
			return nil, err
		}
	}
	desc, data, err := fetchManifestByReference(ctx, t, ref.Reference)
	if err != nil {
		return nil, err
	}
	return VersionOf(ref, desc, data, l)
}

// VersionOf gives the version ref names from the index its reference resolved to, already
// fetched (desc, and data with its digest checked), and parsed strictly: for a caller that
// fetched the reference once to tell what it names, and reads everything else by digest.
func VersionOf(ref oci.Ref, desc ocispec.Descriptor, data []byte, l oci.Limits) (*Version, error) {
	v := &Version{Tag: ref.Reference, Type: typeFromRepository(ref)}
	if !ref.IsDigest() {
		ver, err := manifest.TagToVersion(ref.Reference)
		if err != nil {
			return nil, err
		}
		v.Version = ver
	}
	if desc.MediaType == ocispec.MediaTypeImageManifest {
		return nil, fmt.Errorf("%s points at an image manifest, not an index: OpenTofu would reject it (publish it with 'oprov push')", ref)
	}
	ix, err := parseIndex(l, data)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", ref, desc.Digest, err)
	}
	v.Index, v.Parsed = desc, ix
	return v, nil
}

// typeFromRepository guesses the provider type from a repository's last path element, with any
// terraform-provider- prefix removed.
func typeFromRepository(ref oci.Ref) string {
	name := ref.Repository
	if ref.IsLayout() {
		name = filepath.ToSlash(filepath.Clean(ref.Layout))
	}
	name = path.Base(name)
	if t, ok := providerrelease.TypeFromName(name); ok {
		return t
	}
	return name
}

// FetchPlatform fetches and parses one platform's manifest (digest checked).
func FetchPlatform(ctx context.Context, t oci.ReadOnly, v *Version, e manifest.Entry) (*Platform, error) {
	data, err := oci.FetchAll(ctx, t, e.Descriptor, oci.SenderOf(t))
	if err != nil {
		return nil, fmt.Errorf("fetching %s manifest %s: %w", e.Platform, e.Descriptor.Digest, err)
	}
	pm, err := manifest.ParsePlatformManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s manifest %s: %w", e.Platform, e.Descriptor.Digest, err)
	}
	p := &Platform{Platform: e.Platform, Manifest: e.Descriptor, Zip: pm.Layer}
	p.Filename = zipName(v, e.Platform, pm.Filename)
	return p, nil
}

// CheckPlatform refuses a platform whose zip is titled as another version than the one the tag
// names: a tag moved onto another release.
func (v *Version) CheckPlatform(p *Platform) error {
	title := p.Zip.Annotations[manifest.AnnotationTitle]
	if fn, err := providerrelease.ParseFilename(title); err == nil && v.Version != "" && fn.Version != v.Version {
		return fmt.Errorf("the tag says version %s but the signed index holds %s (the tag was moved to another release)", v.Version, title)
	}
	return nil
}

// FetchPlatforms fetches and parses every platform manifest of a version (digests checked), in
// the index's order.
func FetchPlatforms(ctx context.Context, t oci.ReadOnly, v *Version) ([]*Platform, error) {
	return FetchEntries(ctx, t, v, v.Parsed.Entries)
}

// FetchEntries fetches and parses the platform manifests of the given entries of a version
// (digests checked), a few at a time, in the entries' order.
func FetchEntries(ctx context.Context, t oci.ReadOnly, v *Version, entries []manifest.Entry) ([]*Platform, error) {
	out := make([]*Platform, len(entries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(oci.DefaultConcurrency)
	for i, e := range entries {
		g.Go(func() error {
			p, err := FetchPlatform(gctx, t, v, e)
			out[i] = p
			return err
		})
	}
	return out, g.Wait()
}

// zipName picks the release file name for a platform's zip: the layer's title when it follows
// the convention and names the same platform, otherwise one made from the type and version.
func zipName(v *Version, p manifest.Platform, title string) string {
	if fn, err := providerrelease.ParseFilename(title); err == nil && fn.Platform == p && (v.Version == "" || fn.Version == v.Version) {
		return title
	}
	return providerrelease.Filename{Type: v.Type, Version: v.Version, Platform: p}.String()
}

// Select picks platforms of a version: all of them when want is empty. A wanted platform that
// the version lacks is an error that lists what it has.
func (v *Version) Select(want []manifest.Platform) ([]manifest.Entry, error) {
	if len(want) == 0 {
		return v.Parsed.Entries, nil
	}
	var out []manifest.Entry
	for _, p := range want {
		e, ok := v.Parsed.Lookup(p)
		if !ok {
			var have []string
			for _, q := range v.Parsed.Platforms() {
				have = append(have, q.String())
			}
			return nil, fmt.Errorf("version %s has no %s package (it has %s)", v.Tag, p, strings.Join(have, ", "))
		}
		out = append(out, e)
	}
	return out, nil
}

// FetchZip streams a platform's zip into w, checking its digest and size on the way. A zip whose
// descriptor is over the maximum package size is refused before any byte is fetched, and no more
// bytes are read than the descriptor says (and one, to see that the registry stopped there).
func FetchZip(ctx context.Context, t oci.ReadOnly, p *Platform, w io.Writer, progress oci.Progress, l oci.Limits) error {
	if err := l.WithDefaults().CheckBlobSize("the "+p.Filename+" package", p.Zip.Size); err != nil {
		return err
	}
	rc, err := t.Fetch(ctx, p.Zip)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", p.Filename, err)
	}
	defer rc.Close()
	var r io.Reader = rc
	if progress != nil {
		progress.Plan(p.Zip.Size)
		r = oci.ProgressReader(rc, progress)
	}
	if _, err := io.Copy(w, oci.NewVerifyReader(r, p.Zip, oci.SenderOf(t))); err != nil {
		var be *oci.BlobError
		if errors.As(err, &be) {
			return fmt.Errorf("%s does not match its digest %s: %w (the registry's copy is corrupt)", p.Filename, p.Zip.Digest, err)
		}
		return fmt.Errorf("fetching %s (%s): %w", p.Filename, p.Zip.Digest, err)
	}
	return nil
}

// PullOptions tunes a pull.
type PullOptions struct {
	Limits    oci.Limits // what the registry may serve
	Platforms []manifest.Platform
	OutDir    string
	Progress  oci.Progress
	// WriteSums writes a SHA256SUMS file for the pulled zips beside them.
	WriteSums bool
}

// PullResult lists what a pull wrote.
type PullResult struct {
	Version *Version
	Files   []PulledFile
	Sums    string
}

// PulledFile is one zip a pull wrote.
type PulledFile struct {
	Platform manifest.Platform `json:"platform"`
	Path     string            `json:"path"`
	Digest   string            `json:"digest"`
	Size     int64             `json:"size"`
}

// Pull downloads a version's zips under their release names, each written under a temporary name
// and renamed once its digest checks out.
func Pull(ctx context.Context, t oci.Target, ref oci.Ref, opts PullOptions) (*PullResult, error) {
	v, err := ResolveVersion(ctx, t, ref, opts.Limits)
	if err != nil {
		return nil, err
	}
	entries, err := v.Select(opts.Platforms)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	platforms, err := FetchEntries(ctx, t, v, entries)
	if err != nil {
		return nil, err
	}
	res := &PullResult{Version: v}
	sums := providerrelease.Sums{}
	for _, p := range platforms {
		dest := filepath.Join(opts.OutDir, p.Filename)
		err = scratch.WriteFileAtomic(dest, func(w io.Writer) error { return FetchZip(ctx, t, p, w, opts.Progress, opts.Limits) })
		if err != nil {
			return nil, err
		}
		sums[p.Filename] = p.Zip.Digest.Encoded()
		res.Files = append(res.Files, PulledFile{Platform: p.Platform, Path: dest, Digest: p.Zip.Digest.String(), Size: p.Zip.Size})
	}
	if opts.WriteSums && v.Version != "" {
		res.Sums = filepath.Join(opts.OutDir, providerrelease.SumsName(v.Type, v.Version))
		err := scratch.WriteFileAtomic(res.Sums, func(w io.Writer) error { _, err := w.Write(sums.Bytes()); return err })
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ListVersions lists the tags of a repository that name versions, highest first. The listing is
// bounded (see listTags).
func ListVersions(ctx context.Context, t oci.ReadOnly, l oci.Limits) ([]manifest.TaggedVersion, error) {
	tags, err := listTags(ctx, t, l)
	if err != nil {
		return nil, err
	}
	return manifest.VersionTags(tags), nil
}

// fetchManifestByReference resolves a tag or digest and fetches what it names (oras-go does it in
// one request where the target allows), refusing more than a manifest may be and checking the
// digest of what it read.
func fetchManifestByReference(ctx context.Context, t oci.ReadOnly, reference string) (ocispec.Descriptor, []byte, error) {
	desc, data, err := oras.FetchBytes(ctx, t, reference, oras.FetchBytesOptions{MaxBytes: manifest.MaxManifestSize})
	if errors.Is(err, errdef.ErrSizeExceedsLimit) {
		return ocispec.Descriptor{}, nil, fmt.Errorf("%s: the manifest is over the %d byte limit (%w)", reference, manifest.MaxManifestSize, err)
	}
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	return desc, data, nil
}
