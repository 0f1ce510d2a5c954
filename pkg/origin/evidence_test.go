package origin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/mirror"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
	"github.com/oprov/oprov/pkg/origin"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/testorigin"
)

// mirrored mirrors an origin's release into a layout (the evidence attached) and resolves it.
func mirrored(t *testing.T) (oci.Target, *artifact.Version, *testorigin.Origin) {
	t.Helper()
	ctx := context.Background()
	ca := testca.NewCA(t, t.TempDir())
	org := testorigin.Start(t, ca, testorigin.FakeRelease(t, "hello", "1.0.0", "linux_amd64", "darwin_arm64"), "acme", "hello", "1.0.0")
	addr, err := manifest.ParseProviderAddress(org.Address())
	if err != nil {
		t.Fatal(err)
	}
	ref := oci.Ref{Layout: filepath.Join(t.TempDir(), "hello")}
	to, err := oci.NewClient(oci.Options{}).Open(ctx, ref, true)
	if err != nil {
		t.Fatal(err)
	}
	src := origin.NewSource(oci.NewClient(oci.Options{CAFile: ca.File}), nil)
	if _, err := mirror.MirrorFrom(ctx, to, src, mirror.Options{Address: addr, Constraint: "= 1.0.0", To: ref, Registry: oci.NewClient(oci.Options{CAFile: ca.File})}); err != nil {
		t.Fatal(err)
	}
	v, err := artifact.ResolveVersion(ctx, to, ref.WithReference("1.0.0"), oci.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return to, v, org
}

// TestVerifyEvidence: a mirrored version's SHA256SUMS evidence verifies under its origin key's
// fingerprint, and is refused under another, naming the key it carries; a version without
// evidence says so; a version whose zips SHA256SUMS does not list is refused.
func TestVerifyEvidence(t *testing.T) {
	ctx := context.Background()
	to, v, org := mirrored(t)
	fpr := fmt.Sprintf("%X", org.Key.PrimaryKey.Fingerprint)
	res, err := origin.VerifyEvidence(ctx, to, v, []string{fpr})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fingerprint != fpr || res.Zips != 2 {
		t.Errorf("verified %+v, want by %s over 2 zips", res, fpr)
	}
	other := fmt.Sprintf("%X", testorigin.NewKey(t, "other").PrimaryKey.Fingerprint)
	if _, err := origin.VerifyEvidence(ctx, to, v, []string{other}); err == nil || !strings.Contains(err.Error(), "carries the key(s) "+fpr) {
		t.Errorf("under another fingerprint: %v", err)
	}

	// Another release (other zips) passed off as this version, with this version's evidence
	// copied onto it: the signed SHA256SUMS names other digests.
	rel, err := providerrelease.Collect(ctx, []string{testorigin.FakeRelease(t, "hello", "1.0.1", "linux_amd64")})
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := artifact.PushRelease(ctx, to, rel, "1.0.1", artifact.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := artifact.ResolveVersion(ctx, to, oci.Ref{Layout: "hello", Reference: pushed.Index.Digest.String()}, oci.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	w.Version = "1.0.0"
	if _, err := origin.VerifyEvidence(ctx, to, w, []string{fpr}); !errors.Is(err, origin.ErrNoEvidence) {
		t.Errorf("a version without evidence: %v", err)
	}
	copyEvidence(t, to, v, w)
	if _, err := origin.VerifyEvidence(ctx, to, w, []string{fpr}); err == nil || !strings.Contains(err.Error(), "the signed SHA256SUMS says terraform-provider-hello_1.0.0_linux_amd64.zip is sha256:") {
		t.Errorf("evidence of other zips: %v", err)
	}
}

// copyEvidence attaches v's evidence files to w.
func copyEvidence(t *testing.T, to oci.Target, v, w *artifact.Version) {
	t.Helper()
	ctx := context.Background()
	refs, err := registry.Referrers(ctx, to, v.Index, origin.ArtifactTypeChecksums)
	if err != nil || len(refs) != 1 {
		t.Fatalf("evidence referrers %v: %v", refs, err)
	}
	data, err := content.FetchAll(ctx, to, refs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var files []referrers.AttachFile
	for _, l := range m.Layers {
		b, err := content.FetchAll(ctx, to, l)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, referrers.AttachFile{Name: l.Annotations[ocispec.AnnotationTitle], MediaType: l.MediaType, Data: b})
	}
	if _, err := referrers.Attach(ctx, to, w.Index, origin.ArtifactTypeChecksums, files, m.Annotations); err != nil {
		t.Fatal(err)
	}
}
