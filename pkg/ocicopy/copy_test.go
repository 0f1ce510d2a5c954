package ocicopy

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"oras.land/oras-go/v2/content"

	"github.com/oprov/oprov/internal/progresstest"
	"github.com/oprov/oprov/internal/testorigin"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/referrers"
	"github.com/oprov/oprov/pkg/release"
)

// layout opens a fresh OCI layout.
func layout(t *testing.T) oci.Target {
	t.Helper()
	target, err := oci.Open(context.Background(), oci.Ref{Layout: filepath.Join(t.TempDir(), "layout")}, oci.Options{}, true)
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
	rel, err := release.Collect(ctx, []string{testorigin.FakeRelease(t, "hello", version, "linux_amd64", "darwin_arm64")})
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
