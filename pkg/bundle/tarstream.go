package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/internal/iox"
	ociref "github.com/oprov/oprov/pkg/oci"
)

// tarLayout is a copy destination that writes an OCI image layout straight into a tar stream:
// each blob goes in as it arrives, checked against its digest on the way, so a save reads the
// registry once and writes the tarball once (no layout directory to write and read back).
// Pushes are serialized: a tar has one writer. index.json and oci-layout go in at Close.
type tarLayout struct {
	mu        sync.Mutex
	tw        *tar.Writer
	ctx       context.Context
	have      map[digest.Digest]bool
	manifests map[digest.Digest][]byte // kept to answer Fetch (copies walk them)
	tags      map[string]ocispec.Descriptor
	order     []string
	// skip holds blobs to leave out as if present (a delta's base has them).
	skip map[digest.Digest]bool
	// back, when set, reads back what was written (streamBlob checks a zip where it landed);
	// spill is where streamBlob keeps a blob it cannot write straight into the tarball.
	back  *readBack
	spill string
	// broken is set when a blob stopped halfway into the tarball: nothing more may go in.
	broken error
}

func newTarLayout(ctx context.Context, w io.Writer) (*tarLayout, error) {
	t := &tarLayout{tw: tar.NewWriter(w), ctx: ctx, have: map[digest.Digest]bool{},
		manifests: map[digest.Digest][]byte{}, tags: map[string]ocispec.Descriptor{}}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := t.tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// isManifest reports whether a descriptor is a manifest or index (whose bytes copies read back).
func isManifest(d ocispec.Descriptor) bool {
	switch d.MediaType {
	case ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex,
		"application/vnd.docker.distribution.manifest.v2+json", "application/vnd.docker.distribution.manifest.list.v2+json",
		"application/vnd.oci.artifact.manifest.v1+json":
		return true
	}
	return false
}

func (t *tarLayout) Push(ctx context.Context, d ocispec.Descriptor, r io.Reader) error {
	if err := d.Digest.Validate(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken != nil {
		return t.broken
	}
	if t.have[d.Digest] || t.skip[d.Digest] {
		return nil
	}
	h := &tar.Header{Name: "blobs/" + d.Digest.Algorithm().String() + "/" + d.Digest.Encoded(), Typeflag: tar.TypeReg,
		Mode: 0o644, Size: d.Size, Format: tar.FormatPAX}
	if err := t.tw.WriteHeader(h); err != nil {
		return err
	}
	// Copies check what they read from their source (artifactcopy); this checks again what goes in.
	vr := ociref.NewVerifyReader(iox.ContextReader(ctx, r), d, "the source")
	var keep bytes.Buffer
	var dst io.Writer = t.tw
	if isManifest(d) {
		dst = io.MultiWriter(t.tw, &keep)
	}
	if _, err := io.Copy(dst, vr); err != nil {
		return err
	}
	t.have[d.Digest] = true
	if isManifest(d) {
		t.manifests[d.Digest] = keep.Bytes()
	}
	return nil
}

func (t *tarLayout) Exists(_ context.Context, d ocispec.Descriptor) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.have[d.Digest] || t.skip[d.Digest], nil
}

func (t *tarLayout) Fetch(_ context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b, ok := t.manifests[d.Digest]; ok {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	return nil, fmt.Errorf("%s: %w (already streamed into the tarball)", d.Digest, errdef.ErrNotFound)
}

func (t *tarLayout) Tag(_ context.Context, d ocispec.Descriptor, ref string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.tags[ref]; !ok {
		t.order = append(t.order, ref)
	}
	t.tags[ref] = d
	return nil
}

func (t *tarLayout) Resolve(_ context.Context, ref string) (ocispec.Descriptor, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.tags[ref]
	if !ok {
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", ref, errdef.ErrNotFound)
	}
	return d, nil
}

// pushed lists the blobs written, in no order.
func (t *tarLayout) pushed() []digest.Digest {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]digest.Digest, 0, len(t.have))
	for d := range t.have {
		out = append(out, d)
	}
	return out
}

// addFile writes a file beside the layout (a bundle's listing).
func (t *tarLayout) addFile(name string, data []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := t.tw.Write(data)
	return err
}

// Predecessors: referrers are found in the source; the destination is never asked.
func (t *tarLayout) Predecessors(context.Context, ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	return nil, nil
}

// Close writes oci-layout and index.json (one entry a tag, named by the ref.name annotation, as
// oras' layout store writes them) and ends the tar.
func (t *tarLayout) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken != nil {
		return t.broken
	}
	refs := append([]string(nil), t.order...)
	sort.Strings(refs)
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
	for _, r := range refs {
		d := t.tags[r]
		e := ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size, ArtifactType: d.ArtifactType,
			Annotations: map[string]string{ocispec.AnnotationRefName: r}}
		idx.Manifests = append(idx.Manifests, e)
	}
	index, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	for _, f := range []struct {
		name string
		data []byte
	}{{ocispec.ImageIndexFile, index}, {ocispec.ImageLayoutFile, layout}} {
		if err := t.tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := t.tw.Write(f.data); err != nil {
			return err
		}
	}
	return t.tw.Close()
}
