package mirror

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/source"
	"github.com/oprov/oprov/tests/testkit/testorigin"
)

// MirrorFrom does not care which kind of source it holds: here it copies from an OCI repository
// source (the one the loader uses), and the copy holds the same zips under the same version.
func TestMirrorFromAnOCISource(t *testing.T) {
	ctx := context.Background()
	dist := testorigin.FakeRelease(t, "hello", "1.2.0", "linux_amd64", "darwin_arm64")
	rel, err := providerrelease.Collect(context.Background(), []string{dist})
	if err != nil {
		t.Fatal(err)
	}
	from, fromRef := layout(t)
	if _, err := artifact.PushRelease(ctx, from, rel, "1.2.0", artifact.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	src := source.NewOCI(&source.Env{Cache: c}, nil, func(manifest.ProviderAddress) (oci.Ref, error) { return fromRef, nil })
	to, toRef := layout(t)
	addr, _ := manifest.ParseProviderAddress("example.com/acme/hello")
	res, err := MirrorFrom(ctx, to, src, Options{Address: addr, Constraint: ">= 1.0", To: toRef})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Version != "1.2.0" || res[0].Platforms != 2 || res[0].Skipped {
		t.Fatalf("mirrored %+v", res)
	}
	copied, err := artifact.ResolveVersion(ctx, to, toRef.WithReference("1.2.0"), oci.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rel.Artifacts {
		e, ok := copied.Parsed.Lookup(a.Name.Platform)
		if !ok {
			t.Fatalf("the copy lacks %s", a.Name.Platform)
		}
		p, err := artifact.FetchPlatform(ctx, to, copied, e)
		if err != nil {
			t.Fatal(err)
		}
		if p.Zip.Digest != a.Package().LayerDescriptor().Digest {
			t.Errorf("%s: copied zip %s, want %s", a.Name.Platform, p.Zip.Digest, a.Package().LayerDescriptor().Digest)
		}
	}
	// A second run finds the copy complete and pushes nothing.
	again, err := MirrorFrom(ctx, to, src, Options{Address: addr, Constraint: ">= 1.0", To: toRef})
	if err != nil || len(again) != 1 || !again[0].Skipped || again[0].IndexDigest != res[0].IndexDigest {
		t.Errorf("second run: %+v, %v", again, err)
	}
}
