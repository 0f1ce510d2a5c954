package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content/oci"
)

func desc(mt string, b []byte) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: mt, Digest: digest.FromBytes(b), Size: int64(len(b))}
}

// TestTarLayoutStreams: what tarLayout writes in one pass opens as an OCI layout tarball whose
// tag resolves and whose blobs read back; a blob that does not match its digest is refused.
func TestTarLayoutStreams(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	tl, err := newTarLayout(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	layer := []byte("a zip, say")
	cfg := []byte("{}")
	m, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: desc(ocispec.MediaTypeEmptyJSON, cfg), Layers: []ocispec.Descriptor{desc("archive/zip", layer)}})
	md := desc(ocispec.MediaTypeImageManifest, m)

	bad := desc("archive/zip", []byte("other bytes"))
	if err := tl.Push(ctx, bad, strings.NewReader("tampered!!!")); err == nil {
		t.Fatal("a blob that does not match its digest was accepted")
	}
	// A refused push leaves the tar unusable, so start again, as Save's caller does.
	buf.Reset()
	if tl, err = newTarLayout(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		d ocispec.Descriptor
		b []byte
	}{{desc("archive/zip", layer), layer}, {desc(ocispec.MediaTypeEmptyJSON, cfg), cfg}, {md, m}} {
		if err := tl.Push(ctx, p.d, bytes.NewReader(p.b)); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := tl.Exists(ctx, md); !ok {
		t.Error("a pushed manifest does not exist")
	}
	rc, err := tl.Fetch(ctx, md)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(rc); !bytes.Equal(got, m) {
		t.Error("the manifest fetched back differs")
	}
	if err := tl.Tag(ctx, md, "acme/hello:1.0.0"); err != nil {
		t.Fatal(err)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := oci.NewFromTar(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.Resolve(ctx, "acme/hello:1.0.0")
	if err != nil || d.Digest != md.Digest {
		t.Fatalf("resolve: %v %v", d, err)
	}
	rc, err = st.Fetch(ctx, desc("archive/zip", layer))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(rc); !bytes.Equal(got, layer) {
		t.Error("the layer read back differs")
	}
}
