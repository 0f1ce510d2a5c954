package artifactcopy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/tests/testkit/progresstest"
	"github.com/oprov/oprov/tests/testkit/testorigin"
)

// layout opens a fresh OCI layout.
func layout(t *testing.T) oci.Target {
	t.Helper()
	target, err := oci.NewClient(oci.Options{}).Open(context.Background(), oci.Ref{Layout: filepath.Join(t.TempDir(), "layout")}, true)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// versionLayout gives a layout holding one version of a provider, tagged, for two platforms,
// with a referrer attached to its index, as a mirror leaves it.
func versionLayout(t *testing.T, version string) oci.Target {
	t.Helper()
	ctx := context.Background()
	rel, err := providerrelease.Collect(ctx, []string{testorigin.FakeRelease(t, "hello", version, "linux_amd64", "darwin_arm64")})
	if err != nil {
		t.Fatal(err)
	}
	target := layout(t)
	pushed, err := artifact.PushRelease(ctx, target, rel, version, artifact.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files := []referrers.AttachFile{{Name: "note.txt", MediaType: "text/plain", Data: []byte("provenance")}}
	if _, err := referrers.Attach(ctx, target, pushed.Index, "application/vnd.example.note", files, nil); err != nil {
		t.Fatal(err)
	}
	return target
}

// TestCopyProgressStaysWithinItsPlan: a copy plans each blob before sending it and reports its
// bytes as they are read, ending with everything planned moved.
func TestCopyProgressStaysWithinItsPlan(t *testing.T) {
	src := versionLayout(t, "1.0.0")
	dst := layout(t)
	p := &progresstest.PlanCheck{T: t}
	res, err := Copy(context.Background(), src, dst, []string{"1.0.0"}, Options{Progress: p})
	if err != nil {
		t.Fatal(err)
	}
	if planned, done := p.Totals(); done != res.Bytes || planned != res.Bytes {
		t.Errorf("copied %d bytes; progress planned %d and moved %d", res.Bytes, planned, done)
	}
}

// TestCopyProgressMovesWithTheBytes: one blob's push reports its bytes as they are read, in
// several steps, not once at the end.
func TestCopyProgressMovesWithTheBytes(t *testing.T) {
	dst := layout(t)
	data := bytes.Repeat([]byte("x"), 256<<10)
	desc := content.NewDescriptorFromBytes("application/octet-stream", data)
	steps := &stepCount{}
	if err := (progressDestination{dst, steps}).Push(context.Background(), desc, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if steps.done != int64(len(data)) || steps.calls < 2 {
		t.Errorf("a %d-byte push reported %d bytes in %d steps", len(data), steps.done, steps.calls)
	}
}

type stepCount struct{ done, calls int64 }

func (s *stepCount) Plan(int64)      {}
func (s *stepCount) Advance(n int64) { s.done += n; s.calls++ }

// withSig adds a cosign-style .sig manifest for the version's index to a layout and gives its
// config's descriptor.
func withSig(t *testing.T, target oci.Target, version string) ocispec.Descriptor {
	t.Helper()
	ctx := context.Background()
	idx, err := target.Resolve(ctx, version)
	if err != nil {
		t.Fatal(err)
	}
	cfg := []byte(`{"architecture":"","os":"","rootfs":{"type":"layers","diff_ids":["` + idx.Digest.String() + `"]}}`)
	layer := []byte(`{"critical":{"image":{"docker-manifest-digest":"` + idx.Digest.String() + `"}}}`)
	cd := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, cfg)
	ld := content.NewDescriptorFromBytes("application/vnd.dev.cosign.simplesigning.v1+json", layer)
	m, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cd, Layers: []ocispec.Descriptor{ld}})
	md := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, m)
	for _, b := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{cd, cfg}, {ld, layer}, {md, m}} {
		if err := target.Push(ctx, b.d, bytes.NewReader(b.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := target.Tag(ctx, md, manifest.CosignSignatureTag(idx.Digest)); err != nil {
		t.Fatal(err)
	}
	return cd
}

// tampering serves other bytes for one blob, as a damaged bundle or a lying registry does.
type tampering struct {
	oci.Target
	blob digest.Digest
}

func (s tampering) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := s.Target.Fetch(ctx, d)
	if err != nil || d.Digest != s.blob {
		return rc, err
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	data[0] ^= 1
	return io.NopCloser(bytes.NewReader(data)), nil
}

// tagLog records the order of a destination's tags.
type tagLog struct {
	oci.Target
	tags []string
}

func (d *tagLog) Tag(ctx context.Context, desc ocispec.Descriptor, ref string) error {
	d.tags = append(d.tags, ref)
	return d.Target.Tag(ctx, desc, ref)
}

// TestCopyTagsOnlyAfterEverything: a version whose .sig manifest has a corrupt config is refused
// by VerifyAll and by Copy, and Copy leaves no tag; a good one gets its .sig tag before its own.
func TestCopyTagsOnlyAfterEverything(t *testing.T) {
	ctx := context.Background()
	src := versionLayout(t, "1.0.0")
	cfg := withSig(t, src, "1.0.0")
	bad := tampering{src, cfg.Digest}
	if _, err := VerifyAll(ctx, bad, []string{"1.0.0"}, oci.Limits{}); err == nil || !strings.Contains(err.Error(), cfg.Digest.String()) || !strings.Contains(err.Error(), ".sig") {
		t.Errorf("VerifyAll passed a corrupt .sig config: %v", err)
	}
	dst := &tagLog{Target: layout(t)}
	if _, err := Copy(ctx, bad, dst, []string{"1.0.0"}, Options{}); err == nil || !strings.Contains(err.Error(), "declared digest "+cfg.Digest.String()) {
		t.Errorf("Copy of a corrupt .sig: %v", err)
	}
	if len(dst.tags) != 0 {
		t.Errorf("a failed copy wrote tags %v", dst.tags)
	}
	good := &tagLog{Target: layout(t)}
	if _, err := Copy(ctx, src, good, []string{"1.0.0"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(good.tags) != 2 || !strings.HasSuffix(good.tags[0], ".sig") || good.tags[1] != "1.0.0" {
		t.Errorf("tags written in the order %v, want the .sig tag before the version's", good.tags)
	}
}
