package modulepkg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
)

// Provenance annotations on a module manifest: where the module came from. The version also goes
// in org.opencontainers.image.version (ocispec.AnnotationVersion) when there is one.
const (
	AnnotationSource         = "io.oprov.module.source"          // the full source address
	AnnotationVersion        = "io.oprov.module.version"         // version, git commit or oci digest
	AnnotationOriginChecksum = "io.oprov.module.origin-checksum" // the origin's own checksum
)

// Build makes a module package's manifest for a zip: artifactType modulepkg, the empty config, one
// archive/zip layer, and the annotations given (none written when there are none). The same zip and
// annotations always give the same bytes, so the same digest.
func Build(zipData []byte, annotations map[string]string) (ocispec.Descriptor, []byte, error) {
	if len(zipData) == 0 {
		return ocispec.Descriptor{}, nil, errors.New("module package: the zip is empty")
	}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: manifest.ArtifactTypeModule,
		Config:       manifest.EmptyConfig,
		Layers:       []ocispec.Descriptor{LayerDescriptor(zipData)},
	}
	if len(annotations) > 0 {
		m.Annotations = annotations
	}
	data, err := json.Marshal(m) // maps marshal with sorted keys
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	desc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, data)
	desc.ArtifactType = manifest.ArtifactTypeModule
	return desc, data, nil
}

// LayerDescriptor describes a module zip as the package's one layer.
func LayerDescriptor(zipData []byte) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: manifest.MediaTypeZip, Digest: digest.FromBytes(zipData), Size: int64(len(zipData))}
}

// Push stores a module package in dst: the empty config and the zip (unless already there), then
// the manifest, tagged when tag is set. It gives the manifest's descriptor.
func Push(ctx context.Context, dst oras.Target, zipData []byte, tag string, annotations map[string]string) (ocispec.Descriptor, error) {
	desc, data, err := Build(zipData, annotations)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	for _, b := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{manifest.EmptyConfig, manifest.EmptyConfigData}, {LayerDescriptor(zipData), zipData}, {desc, data}} {
		if err := pushIfMissing(ctx, dst, b.desc, b.data); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("pushing the module package's %s %s: %w", b.desc.MediaType, b.desc.Digest, err)
		}
	}
	if tag != "" {
		if err := dst.Tag(ctx, desc, tag); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("tagging the module package %s as %s: %w", desc.Digest, tag, err)
		}
	}
	return desc, nil
}

func pushIfMissing(ctx context.Context, dst oras.Target, desc ocispec.Descriptor, data []byte) error {
	ok, err := dst.Exists(ctx, desc)
	if err != nil || ok {
		return err
	}
	if err := dst.Push(ctx, desc, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return err
	}
	return nil
}

// Resolved is a module package's manifest, resolved from a tag or digest and checked.
type Resolved struct {
	Manifest ocispec.Descriptor // artifactType set
	Parsed   *ocispec.Manifest
}

// Resolve resolves ref (a tag or digest) in src, fetches the manifest (its digest checked, at most
// the manifest size limit) and checks that it is a module package (parseManifest).
func Resolve(ctx context.Context, src oras.ReadOnlyTarget, ref string) (*Resolved, error) {
	desc, data, err := oras.FetchBytes(ctx, src, ref, oras.FetchBytesOptions{MaxBytes: manifest.MaxManifestSize})
	if errors.Is(err, errdef.ErrSizeExceedsLimit) {
		return nil, fmt.Errorf("%s: the manifest is over the %d byte limit", ref, manifest.MaxManifestSize)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	r, err := FromManifest(desc, data)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", ref, desc.Digest, err)
	}
	return r, nil
}

// FromManifest checks a manifest already fetched (its digest checked against desc) and gives it
// as a resolved module package.
func FromManifest(desc ocispec.Descriptor, data []byte) (*Resolved, error) {
	m, err := parseManifest(data)
	if err != nil {
		return nil, &NotModuleError{err}
	}
	desc.ArtifactType = m.ArtifactType
	return &Resolved{Manifest: desc, Parsed: m}, nil
}

// NotModuleError is a manifest that is not a module package (a provider's index, an image, or a
// malformed package).
type NotModuleError struct{ Err error }

func (e *NotModuleError) Error() string { return e.Err.Error() }
func (e *NotModuleError) Unwrap() error { return e.Err }

// Layer is the package's one zip layer.
func (r *Resolved) Layer() ocispec.Descriptor { return r.Parsed.Layers[0] }

// FetchZip fetches the package's zip, refusing one over maxBytes before any byte of it is read,
// and checking its digest and size.
func (r *Resolved) FetchZip(ctx context.Context, src oras.ReadOnlyTarget, maxBytes int64) ([]byte, error) {
	layer := r.Layer()
	if layer.Size > maxBytes {
		return nil, fmt.Errorf("module package %s: the zip is %d bytes, over the limit of %d", r.Manifest.Digest, layer.Size, maxBytes)
	}
	zipData, err := fetchBlob(ctx, src, layer)
	if err != nil {
		return nil, fmt.Errorf("module package %s: the zip %s: %w", r.Manifest.Digest, layer.Digest, err)
	}
	return zipData, nil
}

// ZipHashes fetches the package's zip as FetchZip does (bounded, its digest and size checked)
// and gives its hashes (Hashes): what a verifier that checked the manifest's signature reports of
// the zip below it.
func (r *Resolved) ZipHashes(ctx context.Context, src oras.ReadOnlyTarget, maxBytes int64) (h1, zh string, err error) {
	zipData, err := r.FetchZip(ctx, src, maxBytes)
	if err != nil {
		return "", "", err
	}
	if h1, zh, err = Hashes(zipData); err != nil {
		return "", "", fmt.Errorf("module package %s: %w", r.Manifest.Digest, err)
	}
	return h1, zh, nil
}

func fetchBlob(ctx context.Context, src oras.ReadOnlyTarget, desc ocispec.Descriptor) ([]byte, error) {
	rc, err := src.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(oci.NewVerifyReader(rc, desc, oci.SenderOf(src)))
}

// parseManifest checks that data is a module package's manifest and parses it: an image manifest
// (an index is a provider or a multi-platform image), artifactType modulepkg, exactly one layer of
// media type archive/zip with a valid digest.
func parseManifest(data []byte) (*ocispec.Manifest, error) {
	if len(data) > manifest.MaxManifestSize {
		return nil, fmt.Errorf("manifest is %d bytes, over the %d byte limit", len(data), manifest.MaxManifestSize)
	}
	var raw struct {
		ocispec.Manifest
		Manifests json.RawMessage `json:"manifests"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("manifest is not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("manifest has trailing data after the JSON document")
	}
	m := raw.Manifest
	switch {
	case m.MediaType == ocispec.MediaTypeImageIndex || len(raw.Manifests) > 0:
		return nil, errors.New("this is an index (a provider or a multi-platform image), not a module package: a module package is one image manifest")
	case m.MediaType != ocispec.MediaTypeImageManifest:
		return nil, fmt.Errorf("manifest has mediaType %q, want %q", m.MediaType, ocispec.MediaTypeImageManifest)
	case m.ArtifactType != manifest.ArtifactTypeModule:
		return nil, fmt.Errorf("manifest has artifactType %q, want %q: this is not an OpenTofu module package", m.ArtifactType, manifest.ArtifactTypeModule)
	case len(m.Layers) != 1:
		return nil, fmt.Errorf("module package has %d layers, want exactly one %s layer", len(m.Layers), manifest.MediaTypeZip)
	case m.Layers[0].MediaType != manifest.MediaTypeZip:
		return nil, fmt.Errorf("module package's layer has media type %q, want %q", m.Layers[0].MediaType, manifest.MediaTypeZip)
	case m.Layers[0].Size < 0:
		return nil, fmt.Errorf("module package's layer has a negative size %d", m.Layers[0].Size)
	}
	if err := m.Layers[0].Digest.Validate(); err != nil {
		return nil, fmt.Errorf("module package's layer digest %q: %w", m.Layers[0].Digest, err)
	}
	return &m, nil
}
