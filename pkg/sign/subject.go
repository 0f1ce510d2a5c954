package sign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
)

// Kind is what a reference names, as verification tells them apart.
type Kind string

// The kinds of subject: a provider version (an index whose artifactType is OpenTofu's
// provider's), a module package (a manifest whose artifactType is the module's), and any other
// image or artifact.
const (
	KindProvider Kind = "provider"
	KindModule   Kind = "module"
	KindImage    Kind = "image"
)

// MaxImageManifests bounds the entries of an image index that are read: a multi-platform image
// lists a few platforms (and maybe their attestations), far fewer than this.
const MaxImageManifests = 256

// dockerManifestList is Docker's media type of a multi-platform image's index (OCI's is
// ocispec.MediaTypeImageIndex).
const dockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"

// Subject is what a reference names, resolved once (Resolve): its tag was asked for one time, and what
// the answer named is read from here on by its digest (Desc), so that a tag moved between two
// requests cannot show one thing to one check and another to the next. One of Version, Module
// and Image is set, as Kind says.
type Subject struct {
	Ref     oci.Ref            // as given
	Kind    Kind               // what it names
	Desc    ocispec.Descriptor // the manifest or index the reference resolved to
	Version *artifact.Version  // a provider version's index, parsed
	Module  *modulepkg.Resolved
	Image   *Image
}

// Image is what a reference names when it is neither a provider version nor a module package: a
// container image (such as oprov's own serve image), an image index, or another artifact.
type Image struct {
	Annotations map[string]string
	Manifests   []ocispec.Descriptor // an index's entries (checked: digests valid, platforms plain names)
}

// Resolve fetches the manifest or index ref names (by tag or digest) once, its digest checked,
// and says what it is (commands that act on a reference, sign, inspect and verify, tell them
// apart by it alone): a provider version (artifactType provider: the index parsed strictly, its
// tag a version), a module package (artifactType module: the manifest checked), or any other
// image or artifact (an index's entries bounded and checked).
func Resolve(ctx context.Context, t oci.ReadOnly, ref oci.Ref, l oci.Limits) (*Subject, error) {
	if ref.Reference == "" {
		return nil, fmt.Errorf("%s: no version given (write %s:VERSION)", ref, ref)
	}
	desc, data, err := oras.FetchBytes(ctx, t, ref.Reference, oras.FetchBytesOptions{MaxBytes: manifest.MaxManifestSize})
	if errors.Is(err, errdef.ErrSizeExceedsLimit) {
		return nil, fmt.Errorf("%s: the manifest is over the %d byte limit (%w)", ref.Reference, manifest.MaxManifestSize, err)
	}
	if err != nil {
		return nil, err
	}
	var peek struct {
		ArtifactType string               `json:"artifactType"`
		Annotations  map[string]string    `json:"annotations"`
		Manifests    []ocispec.Descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(data, &peek); err != nil {
		return nil, fmt.Errorf("%s (%s): the manifest is not valid JSON: %w", ref, desc.Digest, err)
	}
	s := &Subject{Ref: ref, Desc: desc}
	switch peek.ArtifactType {
	case manifest.ArtifactTypeModule:
		s.Kind = KindModule
		if s.Module, err = modulepkg.FromManifest(desc, data); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", ref, desc.Digest, err)
		}
		s.Desc = s.Module.Manifest // with its artifactType
	case manifest.ArtifactTypeProvider:
		s.Kind = KindProvider
		if s.Version, err = artifact.VersionOf(ref, desc, data, l); err != nil {
			return nil, err
		}
	default:
		s.Kind = KindImage
		if s.Image, err = imageOf(ref, desc, peek.Annotations, peek.Manifests); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// annotations are a module's manifest's or an image's.
func (s *Subject) annotations() map[string]string {
	if s.Module != nil {
		return s.Module.Parsed.Annotations
	}
	if s.Image != nil {
		return s.Image.Annotations
	}
	return nil
}

// imageOf checks what an image's manifest or index says: an index's entries are bounded in
// number, their digests valid and their platforms plain names (verify prints them, so no control
// character is let through).
func imageOf(ref oci.Ref, desc ocispec.Descriptor, annotations map[string]string, entries []ocispec.Descriptor) (*Image, error) {
	img := &Image{Annotations: annotations}
	if desc.MediaType != ocispec.MediaTypeImageIndex && desc.MediaType != dockerManifestList {
		return img, nil
	}
	if len(entries) > MaxImageManifests {
		return nil, fmt.Errorf("%s (%s): the index lists %d manifests, over the limit of %d", ref, desc.Digest, len(entries), MaxImageManifests)
	}
	for i, m := range entries {
		if err := m.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("%s (%s): index entry %d: digest %q: %v", ref, desc.Digest, i, m.Digest, err)
		}
		if p := m.Platform; p != nil && !(platformWord(p.OS) && platformWord(p.Architecture) && (p.Variant == "" || platformWord(p.Variant))) {
			return nil, fmt.Errorf("%s (%s): index entry %d: platform %q/%q/%q is not an OS, architecture and variant name (letters, digits, '.', '_' and '-')", ref, desc.Digest, i, p.OS, p.Architecture, p.Variant)
		}
	}
	img.Manifests = entries
	return img, nil
}

// platformWord reports whether s can be an OS, architecture or variant name as images give them
// (linux, amd64, v8).
func platformWord(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
