// Package referrers attaches artifacts to a manifest as OCI 1.1 referrers (with the referrers-tag
// fallback oras-go keeps for registries without the API) and discovers what refers to one,
// cosign's .sig tag included.
package referrers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
)

// AttachFile is one file to attach as a layer of a referrer.
type AttachFile struct {
	Name      string // recorded as the layer's title
	MediaType string
	Path      string // read from here, or
	Data      []byte // from here
}

// Attach stores a referrer of subject: an image manifest with the given artifact type, the OCI
// empty config and one layer per file, and subject as its subject. The manifest carries no
// timestamp, so attaching the same files again stores nothing new. On registries without the
// referrers API, oras-go keeps the OCI referrers tag up to date.
func Attach(ctx context.Context, t oci.Target, subject ocispec.Descriptor, artifactType string, files []AttachFile, annotations map[string]string) (ocispec.Descriptor, error) {
	if artifactType == "" {
		return ocispec.Descriptor{}, errors.New("attach: an artifact type is required")
	}
	layers := make([]ocispec.Descriptor, 0, len(files))
	for _, f := range files {
		desc, open, err := fileBlob(f)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		if _, err := oci.PushIfMissing(ctx, t, desc, open, nil); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("attach %s: %w", f.Name, err)
		}
		layers = append(layers, desc)
	}
	empty := ocispec.DescriptorEmptyJSON
	if err := oci.PushBytes(ctx, t, empty, empty.Data); err != nil {
		return ocispec.Descriptor{}, err
	}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       ocispec.DescriptorEmptyJSON,
		Layers:       layers,
		Subject:      &ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations:  annotations,
	}
	data, err := json.Marshal(m)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: artifactType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := oci.PushBytes(ctx, t, desc, data); err != nil {
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}

func fileBlob(f AttachFile) (ocispec.Descriptor, func() (io.ReadCloser, error), error) {
	mt := f.MediaType
	if mt == "" {
		mt = "application/octet-stream"
	}
	var desc ocispec.Descriptor
	var open func() (io.ReadCloser, error)
	if f.Path != "" {
		fh, err := os.Open(f.Path)
		if err != nil {
			return desc, nil, err
		}
		d, err := digest.FromReader(fh)
		st, serr := fh.Stat()
		fh.Close()
		if err != nil || serr != nil {
			return desc, nil, errors.Join(err, serr)
		}
		desc = ocispec.Descriptor{MediaType: mt, Digest: d, Size: st.Size()}
		open = func() (io.ReadCloser, error) { return os.Open(f.Path) }
	} else {
		desc = ocispec.Descriptor{MediaType: mt, Digest: digest.FromBytes(f.Data), Size: int64(len(f.Data))}
		open = oci.BytesOpener(f.Data)
	}
	if f.Name != "" {
		desc.Annotations = map[string]string{ocispec.AnnotationTitle: f.Name}
	}
	return desc, open, nil
}

// Referrer is one artifact that refers to a manifest.
type Referrer struct {
	Digest       digest.Digest `json:"digest"`
	ArtifactType string        `json:"artifact_type"`
	Size         int64         `json:"size"`
	Files        []string      `json:"files,omitempty"` // layer titles
	Tag          string        `json:"tag,omitempty"`   // for cosign's legacy .sig tag
	Referrers    []Referrer    `json:"referrers,omitempty"`
}

// Discover lists what refers to subject: OCI referrers (and their referrers, to the given
// depth) and cosign's legacy sha256-<hex>.sig tag. Each manifest is read for its artifact type,
// because cosign's entries in the referrers-tag fallback index carry their config's type.
func Discover(ctx context.Context, t oci.ReadOnly, subject ocispec.Descriptor, depth int) ([]Referrer, error) {
	refs, err := registry.Referrers(ctx, t, subject, "")
	if err != nil && !errors.Is(err, errdef.ErrNotFound) && !errors.Is(err, errdef.ErrUnsupported) {
		return nil, err
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Digest < refs[j].Digest })
	var out []Referrer
	for _, r := range refs {
		ref, err := describe(ctx, t, r)
		if err != nil {
			return nil, err
		}
		if depth > 1 {
			if ref.Referrers, err = Discover(ctx, t, r, depth-1); err != nil {
				return nil, err
			}
		}
		out = append(out, ref)
	}
	sigTag := manifest.CosignSignatureTag(subject.Digest)
	if d, err := t.Resolve(ctx, sigTag); err == nil {
		ref, err := describe(ctx, t, d)
		if err != nil {
			return nil, err
		}
		ref.Tag = sigTag
		if ref.ArtifactType == "" {
			ref.ArtifactType = "cosign signature (tag)"
		}
		out = append(out, ref)
	} else if !errors.Is(err, errdef.ErrNotFound) {
		return nil, err
	}
	return out, nil
}

func describe(ctx context.Context, t oci.ReadOnly, d ocispec.Descriptor) (Referrer, error) {
	r := Referrer{Digest: d.Digest, ArtifactType: d.ArtifactType, Size: d.Size}
	if d.MediaType != ocispec.MediaTypeImageManifest || d.Size > 4<<20 {
		return r, nil
	}
	data, err := oci.FetchAll(ctx, t, d, oci.SenderOf(t))
	if err != nil {
		return r, fmt.Errorf("fetching referrer %s: %w", d.Digest, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return r, fmt.Errorf("referrer %s: %w", d.Digest, err)
	}
	if m.ArtifactType != "" {
		r.ArtifactType = m.ArtifactType
	} else if m.Config.MediaType != "" && m.Config.MediaType != ocispec.MediaTypeEmptyJSON {
		r.ArtifactType = m.Config.MediaType
	}
	for _, l := range m.Layers {
		name := l.Annotations[ocispec.AnnotationTitle]
		if name == "" {
			name = l.MediaType
		}
		r.Files = append(r.Files, name)
	}
	return r, nil
}
