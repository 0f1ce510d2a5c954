package publish

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/sign"
)

// releaseDir packages a tiny two-platform release and gives its directory (zips and SHA256SUMS).
func releaseDir(t *testing.T, version string) string {
	t.Helper()
	bin, out := t.TempDir(), t.TempDir()
	for _, p := range []string{"linux_amd64", "darwin_arm64"} {
		if err := os.MkdirAll(filepath.Join(bin, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, p, "terraform-provider-hello"), []byte("provider "+p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := providerrelease.PackageBinaries(bin, providerrelease.PackageOptions{Type: "hello", Version: version, OutDir: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

func testSigner(t *testing.T) (*sign.Signer, sign.PublicKey) {
	t.Helper()
	t.Setenv(sign.PasswordEnv, "test-password")
	key, pub, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "k"), sign.EnvPassword(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(key, sign.EnvPassword(nil))
	if err != nil {
		t.Fatal(err)
	}
	pk, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return s, pk
}

// TestFiles: release files become one signed version under the tag, the index created at
// SOURCE_DATE_EPOCH; publishing again uploads nothing.
func TestFiles(t *testing.T) {
	ctx := context.Background()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	signer, pub := testSigner(t)
	ref := oci.Ref{Layout: t.TempDir(), Reference: "1.0.0"}
	target, err := oci.NewClient(oci.Options{}).Open(ctx, ref, true)
	if err != nil {
		t.Fatal(err)
	}
	dir := releaseDir(t, "1.0.0")
	res, err := Files(ctx, target, ref, []string{dir}, Options{Sign: true, Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tag != "1.0.0" || res.Uploaded == 0 || len(res.Built.Packages) != 2 || res.Signed == nil || len(res.Warnings) != 0 {
		t.Errorf("result %+v", res)
	}
	if _, err := sign.Verify(ctx, target, ref, sign.VerifyOptions{Keys: []sign.PublicKey{pub}}); err != nil {
		t.Errorf("the published version does not verify: %v", err)
	}
	v, err := artifact.ResolveVersion(ctx, target, ref, oci.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Index.Digest != res.Index.Digest {
		t.Errorf("the tag names %s, the publish %s", v.Index.Digest, res.Index.Digest)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(res.Built.Index.Data, &idx); err != nil {
		t.Fatal(err)
	}
	if got := idx.Annotations[ocispec.AnnotationCreated]; got != "2023-11-14T22:13:20Z" {
		t.Errorf("created annotation %q, want SOURCE_DATE_EPOCH's time", got)
	}

	again, err := Files(ctx, target, ref, []string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Uploaded != 0 || again.Index.Digest != res.Index.Digest || again.Signed != nil {
		t.Errorf("publishing again: %+v", again)
	}

	if _, err := Files(ctx, target, ref, []string{t.TempDir()}, Options{}); err == nil {
		t.Error("a directory without release files was published")
	}
}

// refuseAfterTag is a repository that takes the release but nothing pushed after its tag moved
// (the signature).
type refuseAfterTag struct {
	oci.Target
	tagged bool
}

func (r *refuseAfterTag) Tag(ctx context.Context, desc ocispec.Descriptor, ref string) error {
	r.tagged = true
	return r.Target.Tag(ctx, desc, ref)
}

func (r *refuseAfterTag) Push(ctx context.Context, desc ocispec.Descriptor, rd io.Reader) error {
	if r.tagged {
		return errors.New("refused")
	}
	return r.Target.Push(ctx, desc, rd)
}

// TestReleaseSignFails: a version that was pushed but not signed says so, with its digest.
func TestReleaseSignFails(t *testing.T) {
	ctx := context.Background()
	signer, _ := testSigner(t)
	ref := oci.Ref{Layout: t.TempDir(), Reference: "1.0.0"}
	target, err := oci.NewClient(oci.Options{}).Open(ctx, ref, true)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := providerrelease.Collect(ctx, []string{releaseDir(t, "1.0.0")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Release(ctx, &refuseAfterTag{Target: target}, ref, rel, Options{Sign: true, Signer: signer})
	var se *SignError
	if !errors.As(err, &se) || res == nil || se.Index != res.Index.Digest.String() {
		t.Fatalf("Release = %+v, %v; want a SignError naming the pushed index", res, err)
	}
	if _, err := artifact.ResolveVersion(ctx, target, ref, oci.Limits{}); err != nil {
		t.Errorf("the version is not there after a failed signature: %v", err)
	}
}

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if s, err := sourceDateEpoch(); s != "" || err != nil {
		t.Errorf("unset: %q %v", s, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if s, err := sourceDateEpoch(); s != "2023-11-14T22:13:20Z" || err != nil {
		t.Errorf("1700000000: %q %v", s, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := sourceDateEpoch(); err == nil {
		t.Error("a non-number was accepted")
	}
}
