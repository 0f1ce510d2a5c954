// Package manifest builds and parses OpenTofu's provider artifact format in OCI: an image index
// (artifactType application/vnd.opentofu.provider) whose entries are per-platform image manifests
// (artifactType application/vnd.opentofu.provider-target), each holding exactly one archive/zip
// layer: the provider's release package.
//
// The package is pure: bytes in, bytes out, no network and no file system. The same inputs always
// give the same bytes, so the same release always gets the same digests.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Media and artifact types of the format (format.md §1).
const (
	ArtifactTypeProvider       = "application/vnd.opentofu.provider"
	artifactTypeProviderTarget = "application/vnd.opentofu.provider-target"
	MediaTypeZip               = "archive/zip"
	// ArtifactTypeModule marks OpenTofu's module package: one image manifest (not an index)
	// with exactly one archive/zip layer whose root is the module's root.
	ArtifactTypeModule = "application/vnd.opentofu.modulepkg"

	// AnnotationTitle names the zip file on its layer descriptor.
	AnnotationTitle = ocispec.AnnotationTitle
	// annotationCreated is set on the index only when SOURCE_DATE_EPOCH gives a fixed time.
	annotationCreated = ocispec.AnnotationCreated

	// AnnotationH1 records, on each platform's descriptor in the index, the h1: lock-file hash
	// of that platform's package (format.md §2), so a lock can list every platform's h1: from the
	// index alone. It is covered by the index digest, and so by a signature over it. OpenTofu
	// ignores it; oprov checks it against the zip whenever it fetches one.
	AnnotationH1 = "dev.oprov.h1"

	// MaxManifestSize is the largest manifest or index OpenTofu accepts, and so do we.
	MaxManifestSize = 4 << 20
)

// EmptyConfig is the OCI empty descriptor used as every platform manifest's config.
var EmptyConfig = ocispec.DescriptorEmptyJSON

// EmptyConfigData is the content behind EmptyConfig.
var EmptyConfigData = []byte("{}")

// Platform is an OS and architecture pair, in Go's GOOS/GOARCH vocabulary.
type Platform struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// String gives the "os_arch" form used in release file names and lock files.
func (p Platform) String() string { return p.OS + "_" + p.Arch }

// Slash gives the "os/arch" form used on command lines of OCI tools.
func (p Platform) Slash() string { return p.OS + "/" + p.Arch }

// ParsePlatform accepts "os_arch" or "os/arch".
func ParsePlatform(s string) (Platform, error) {
	sep := "_"
	if strings.Contains(s, "/") {
		sep = "/"
	}
	os, arch, ok := strings.Cut(s, sep)
	if !ok || !validPlatformWord(os) || !validPlatformWord(arch) || strings.ContainsAny(arch, "_/") {
		return Platform{}, fmt.Errorf("platform %q: want OS_ARCH or OS/ARCH, such as linux_amd64", s)
	}
	return Platform{OS: os, Arch: arch}, nil
}

func validPlatformWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Less orders platforms by OS, then architecture: the stable order of index entries.
func (p Platform) Less(q Platform) bool {
	if p.OS != q.OS {
		return p.OS < q.OS
	}
	return p.Arch < q.Arch
}

// SortPlatforms sorts platforms into index order.
func SortPlatforms(ps []Platform) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Less(ps[j]) })
}

// Package describes one platform's release zip: the content of one platform manifest's layer.
type Package struct {
	Platform Platform
	Filename string // terraform-provider-TYPE_VERSION_OS_ARCH.zip
	Digest   digest.Digest
	Size     int64
	// H1 is the package's h1: hash, recorded on its index entry when set.
	H1 string
}

// LayerDescriptor is the zip's layer descriptor in a platform manifest.
func (p Package) LayerDescriptor() ocispec.Descriptor {
	return ocispec.Descriptor{
		MediaType:   MediaTypeZip,
		Digest:      p.Digest,
		Size:        p.Size,
		Annotations: map[string]string{AnnotationTitle: p.Filename},
	}
}

// Blob is a piece of content together with its descriptor.
type Blob struct {
	Descriptor ocispec.Descriptor
	Data       []byte
}

func newBlob(mediaType string, v any) (Blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return Blob{}, err
	}
	return Blob{
		Descriptor: ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))},
		Data:       data,
	}, nil
}

// buildPlatformManifest builds the image manifest for one platform's zip.
func buildPlatformManifest(p Package) (Blob, error) {
	if err := p.validate(); err != nil {
		return Blob{}, err
	}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactTypeProviderTarget,
		Config:       EmptyConfig,
		Layers:       []ocispec.Descriptor{p.LayerDescriptor()},
	}
	return newBlob(ocispec.MediaTypeImageManifest, m)
}

func (p Package) validate() error {
	if p.Platform.OS == "" || p.Platform.Arch == "" {
		return fmt.Errorf("package %q: platform is not set", p.Filename)
	}
	if err := p.Digest.Validate(); err != nil {
		return fmt.Errorf("package %q: digest %q: %w", p.Filename, p.Digest, err)
	}
	if p.Size < 0 {
		return fmt.Errorf("package %q: negative size", p.Filename)
	}
	return nil
}

// Built is a whole version's graph, built from its packages: the index, and one manifest per
// platform in the index's order.
type Built struct {
	Index     Blob
	Manifests []Blob
	Packages  []Package // in the same order as Manifests
}

// IndexOptions adds optional, still deterministic, content to an index.
type IndexOptions struct {
	// Created, when not empty, is recorded as the org.opencontainers.image.created annotation.
	// Callers pass SOURCE_DATE_EPOCH's time here; never the wall clock.
	Created string
	// Annotations are copied onto the index.
	Annotations map[string]string
}

// Build builds the index and platform manifests for one provider version. The packages may come
// in any order; the index lists them sorted by platform. Two packages for one platform are an error.
func Build(pkgs []Package, opts IndexOptions) (*Built, error) {
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no packages: a provider version needs at least one platform")
	}
	sorted := append([]Package(nil), pkgs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Platform.Less(sorted[j].Platform) })
	b := &Built{Packages: sorted}
	idx := ocispec.Index{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageIndex,
		ArtifactType: ArtifactTypeProvider,
	}
	for i, p := range sorted {
		if i > 0 && sorted[i-1].Platform == p.Platform {
			return nil, fmt.Errorf("two packages for platform %s: %s and %s (keep one)", p.Platform, sorted[i-1].Filename, p.Filename)
		}
		m, err := buildPlatformManifest(p)
		if err != nil {
			return nil, err
		}
		b.Manifests = append(b.Manifests, m)
		d := m.Descriptor
		d.ArtifactType = artifactTypeProviderTarget
		d.Platform = &ocispec.Platform{OS: p.Platform.OS, Architecture: p.Platform.Arch}
		if p.H1 != "" {
			if !ValidH1(p.H1) {
				return nil, fmt.Errorf("package %q: %q is not an h1: hash", p.Filename, p.H1)
			}
			d.Annotations = map[string]string{AnnotationH1: p.H1}
		}
		idx.Manifests = append(idx.Manifests, d)
	}
	if opts.Created != "" || len(opts.Annotations) > 0 {
		idx.Annotations = map[string]string{}
		for k, v := range opts.Annotations {
			idx.Annotations[k] = v
		}
		if opts.Created != "" {
			idx.Annotations[annotationCreated] = opts.Created
		}
	}
	ib, err := newBlob(ocispec.MediaTypeImageIndex, idx)
	if err != nil {
		return nil, err
	}
	ib.Descriptor.ArtifactType = ArtifactTypeProvider
	b.Index = ib
	return b, nil
}

// Entry is one platform of a parsed index.
type Entry struct {
	Platform   Platform
	Descriptor ocispec.Descriptor // the platform manifest's descriptor
	// H1 is the h1: hash the index records for the platform's package (AnnotationH1), or "" when
	// it records none (or something that is not an h1: hash). It is a claim, to be checked
	// against the zip once fetched.
	H1 string
}

// ValidH1 reports whether s has the form of an h1: hash: "h1:" and a base64 sha256.
func ValidH1(s string) bool {
	b64, ok := strings.CutPrefix(s, "h1:")
	if !ok {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	return err == nil && len(raw) == sha256.Size
}

// Index is a parsed provider index. Entries holds only the provider-target entries, sorted by
// platform; Others holds whatever else the index lists (SBOMs, attestations), which OpenTofu skips.
type Index struct {
	Entries     []Entry
	Others      []ocispec.Descriptor
	Annotations map[string]string
}

// Lookup returns the entry for a platform.
func (ix *Index) Lookup(p Platform) (Entry, bool) {
	for _, e := range ix.Entries {
		if e.Platform == p {
			return e, true
		}
	}
	return Entry{}, false
}

// Platforms lists the index's platforms in order.
func (ix *Index) Platforms() []Platform {
	out := make([]Platform, len(ix.Entries))
	for i, e := range ix.Entries {
		out[i] = e.Platform
	}
	return out
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON document")
	}
	return nil
}

// defaultMaxEntries caps the entries of an index: far above any real provider's platforms.
const defaultMaxEntries = 1000

// TooManyEntriesError is an index with more entries than the caller allows.
type TooManyEntriesError struct{ N, Max int }

func (e *TooManyEntriesError) Error() string {
	return fmt.Sprintf("index lists %d entries, over the limit of %d", e.N, e.Max)
}

// ParseIndexLimit parses and validates a provider index the way OpenTofu reads it, and more
// strictly: the media type and artifact type must be the provider's, every provider-target entry
// must be an image manifest with a platform and a valid digest, and no two entries may share a
// platform. It allows at most maxEntries entries (of any kind; defaultMaxEntries is oprov's): more is a
// *TooManyEntriesError, found before any entry is looked at.
func ParseIndexLimit(data []byte, maxEntries int) (*Index, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("index is %d bytes, over the %d byte limit", len(data), MaxManifestSize)
	}
	var raw ocispec.Index
	if err := decodeStrict(data, &raw); err != nil {
		return nil, fmt.Errorf("index is not valid JSON: %w", err)
	}
	if raw.SchemaVersion != 2 {
		return nil, fmt.Errorf("index has schemaVersion %d, want 2", raw.SchemaVersion)
	}
	if raw.MediaType != ocispec.MediaTypeImageIndex {
		if raw.MediaType == ocispec.MediaTypeImageManifest {
			return nil, fmt.Errorf("this is an image manifest, not an index: OpenTofu wants each version tag to point at an image index (push it with 'oprov push')")
		}
		return nil, fmt.Errorf("index has mediaType %q, want %q", raw.MediaType, ocispec.MediaTypeImageIndex)
	}
	if raw.ArtifactType != ArtifactTypeProvider {
		return nil, fmt.Errorf("index has artifactType %q, want %q: this is not an OpenTofu provider", raw.ArtifactType, ArtifactTypeProvider)
	}
	if len(raw.Manifests) > maxEntries {
		return nil, &TooManyEntriesError{N: len(raw.Manifests), Max: maxEntries}
	}
	ix := &Index{Annotations: raw.Annotations}
	seen := map[Platform]bool{}
	for i, d := range raw.Manifests {
		if err := d.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("index entry %d: digest %q: %v", i, d.Digest, err)
		}
		if d.Size < 0 {
			return nil, fmt.Errorf("index entry %d: negative size", i)
		}
		if d.ArtifactType != artifactTypeProviderTarget {
			ix.Others = append(ix.Others, d)
			continue
		}
		if d.MediaType != ocispec.MediaTypeImageManifest {
			return nil, fmt.Errorf("index entry %d (%s): mediaType %q, want %q", i, d.Digest, d.MediaType, ocispec.MediaTypeImageManifest)
		}
		if d.Platform == nil || d.Platform.OS == "" || d.Platform.Architecture == "" {
			return nil, fmt.Errorf("index entry %d (%s): no platform os/architecture", i, d.Digest)
		}
		if d.Platform.OSVersion != "" {
			return nil, fmt.Errorf("index entry %d (%s): platform has os.version %q, which OpenTofu refuses", i, d.Digest, d.Platform.OSVersion)
		}
		if d.Size > MaxManifestSize {
			return nil, fmt.Errorf("index entry %d (%s): manifest size %d is over the %d byte limit", i, d.Digest, d.Size, MaxManifestSize)
		}
		p := Platform{OS: d.Platform.OS, Arch: d.Platform.Architecture}
		if seen[p] {
			return nil, fmt.Errorf("index has two entries for platform %s: OpenTofu reports that as ambiguous", p)
		}
		seen[p] = true
		e := Entry{Platform: p, Descriptor: d}
		if h1 := d.Annotations[AnnotationH1]; ValidH1(h1) {
			e.H1 = h1
		}
		ix.Entries = append(ix.Entries, e)
	}
	if len(ix.Entries) == 0 {
		return nil, fmt.Errorf("index lists no %s entries: no platform can install it", artifactTypeProviderTarget)
	}
	sort.SliceStable(ix.Entries, func(i, j int) bool { return ix.Entries[i].Platform.Less(ix.Entries[j].Platform) })
	return ix, nil
}

// PlatformManifest is a parsed per-platform manifest: its one zip layer.
type PlatformManifest struct {
	Layer ocispec.Descriptor
	// Filename is the layer's title annotation, or "" when it has none.
	Filename    string
	Annotations map[string]string
}

// ParsePlatformManifest parses and validates a platform manifest: an image manifest with the
// provider-target artifact type and exactly one archive/zip layer.
func ParsePlatformManifest(data []byte) (*PlatformManifest, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("manifest is %d bytes, over the %d byte limit", len(data), MaxManifestSize)
	}
	var raw ocispec.Manifest
	if err := decodeStrict(data, &raw); err != nil {
		return nil, fmt.Errorf("platform manifest is not valid JSON: %w", err)
	}
	if raw.SchemaVersion != 2 {
		return nil, fmt.Errorf("platform manifest has schemaVersion %d, want 2", raw.SchemaVersion)
	}
	if raw.MediaType != ocispec.MediaTypeImageManifest {
		return nil, fmt.Errorf("platform manifest has mediaType %q, want %q", raw.MediaType, ocispec.MediaTypeImageManifest)
	}
	if raw.ArtifactType != artifactTypeProviderTarget {
		return nil, fmt.Errorf("platform manifest has artifactType %q, want %q", raw.ArtifactType, artifactTypeProviderTarget)
	}
	if err := raw.Config.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("platform manifest config: digest %q: %v", raw.Config.Digest, err)
	}
	var zips []ocispec.Descriptor
	for i, l := range raw.Layers {
		if err := l.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("platform manifest layer %d: digest %q: %v", i, l.Digest, err)
		}
		if l.Size < 0 {
			return nil, fmt.Errorf("platform manifest layer %d: negative size", i)
		}
		if l.MediaType == MediaTypeZip {
			zips = append(zips, l)
		}
	}
	switch len(zips) {
	case 0:
		return nil, fmt.Errorf("platform manifest has no %s layer", MediaTypeZip)
	case 1:
	default:
		return nil, fmt.Errorf("platform manifest has %d %s layers, want exactly one", len(zips), MediaTypeZip)
	}
	pm := &PlatformManifest{Layer: zips[0], Annotations: raw.Annotations}
	if t := zips[0].Annotations[AnnotationTitle]; t != "" {
		if strings.ContainsAny(t, "/\\") || t == "." || t == ".." {
			return nil, fmt.Errorf("platform manifest layer title %q is not a plain file name", t)
		}
		pm.Filename = t
	}
	return pm, nil
}

// CosignSignatureTag is the tag cosign v2 keeps a digest's signatures under by default:
// sha256-<hex>.sig in the same repository.
func CosignSignatureTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded() + ".sig"
}
