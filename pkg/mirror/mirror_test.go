package mirror

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
	"github.com/oprov/oprov/pkg/origin"
	"github.com/oprov/oprov/pkg/tfcreds"
	"github.com/oprov/oprov/tests/testkit/progresstest"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/tfcredstest"
)

// testOrigin serves acme/hello 1.0.0 for linux_amd64 and darwin_arm64 from a fake release, with
// no token in the environment or CLI configuration that could leak in from the machine.
func testOrigin(t *testing.T) (*testorigin.Origin, *testca.CA) {
	t.Helper()
	tfcredstest.Isolate(t, tfcreds.EnvPrefix)
	ca := testca.NewCA(t, t.TempDir())
	org := testorigin.Start(t, ca, testorigin.FakeRelease(t, "hello", "1.0.0", "linux_amd64", "darwin_arm64"), "acme", "hello", "1.0.0")
	return org, ca
}

// layout opens a fresh OCI layout to mirror into.
func layout(t *testing.T) (oci.Target, oci.Ref) {
	t.Helper()
	ref := oci.Ref{Layout: filepath.Join(t.TempDir(), "layout")}
	target, err := oci.NewClient(oci.Options{}).Open(context.Background(), ref, true)
	if err != nil {
		t.Fatal(err)
	}
	return target, ref
}

func mirrorOptions(org *testorigin.Origin, ca *testca.CA, to oci.Ref) Options {
	addr, err := manifest.ParseProviderAddress(org.Address())
	if err != nil {
		panic(err)
	}
	return Options{Address: addr, To: to, Registry: oci.NewClient(oci.Options{CAFile: ca.File})}
}

// TestMirrorIntoLayout: a version goes from the origin into an OCI layout with every platform,
// its provenance referrer and the signer's key ID; a second run finds it there and skips it.
func TestMirrorIntoLayout(t *testing.T) {
	org, ca := testOrigin(t)
	target, to := layout(t)
	ctx := context.Background()
	res, err := Mirror(ctx, target, mirrorOptions(org, ca, to))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Version != "1.0.0" || res[0].Skipped || res[0].Uploaded == 0 || res[0].Platforms != 2 || res[0].KeyID != testorigin.KeyID(org.Key) {
		t.Fatalf("mirror: %+v", res)
	}
	v, err := artifact.ResolveVersion(ctx, target, to.WithReference("1.0.0"), oci.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Index.Digest.String() != res[0].IndexDigest {
		t.Errorf("the tag points at %s, Mirror said %s", v.Index.Digest, res[0].IndexDigest)
	}
	for _, p := range []string{"linux_amd64", "darwin_arm64"} {
		pl, _ := manifest.ParsePlatform(p)
		if _, ok := v.Parsed.Lookup(pl); !ok {
			t.Errorf("the mirrored index has no %s", p)
		}
	}
	refs, err := referrers.Discover(ctx, target, v.Index, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0].ArtifactType != origin.ArtifactTypeChecksums || len(refs[0].Files) != 3 {
		t.Errorf("provenance referrers: %+v", refs)
	}
	again, err := Mirror(ctx, target, mirrorOptions(org, ca, to))
	if err != nil {
		t.Fatal(err)
	}
	if !again[0].Skipped || again[0].IndexDigest != res[0].IndexDigest {
		t.Errorf("a second mirror did not skip the identical version: %+v", again)
	}
}

// TestMirrorPlatformsAsked: only the platforms asked for are mirrored, and one the origin lacks
// is refused.
func TestMirrorPlatformsAsked(t *testing.T) {
	org, ca := testOrigin(t)
	target, to := layout(t)
	opts := mirrorOptions(org, ca, to)
	opts.Platforms = []manifest.Platform{{OS: "linux", Arch: "amd64"}}
	res, err := Mirror(context.Background(), target, opts)
	if err != nil || res[0].Platforms != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	opts.Platforms = []manifest.Platform{{OS: "windows", Arch: "amd64"}}
	if _, err := Mirror(context.Background(), target, opts); err == nil || !strings.Contains(err.Error(), "offers no windows_amd64 package") {
		t.Errorf("a platform the origin lacks: %v", err)
	}
}

// TestMirrorRefuses: a bad SHA256SUMS signature, a zip that disagrees with SHA256SUMS, a signing
// key swapped for another, and a signer that is not the pinned key are refused, and nothing at
// all reaches the layout.
func TestMirrorRefuses(t *testing.T) {
	org, ca := testOrigin(t)
	other := testorigin.NewKey(t, "not the signer")
	for _, tc := range []struct {
		name   string
		faults testorigin.Faults
		pinned openpgp.EntityList
		want   string
	}{
		{"bad SHA256SUMS signature", testorigin.Faults{BadSignature: true}, nil, "signature does not verify"},
		{"zip that disagrees with SHA256SUMS", testorigin.Faults{TamperZip: true}, nil, "does not match the signed SHA256SUMS"},
		{"signing key swapped for another", testorigin.Faults{SwapKey: true}, nil, "does not verify with the origin's signing keys"},
		{"signer not among the pinned keys", testorigin.Faults{}, openpgp.EntityList{other}, "pinned signing keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			org.SetFaults(tc.faults)
			defer org.SetFaults(testorigin.Faults{})
			target, to := layout(t)
			opts := mirrorOptions(org, ca, to)
			opts.TrustedKeys = tc.pinned
			_, err := Mirror(context.Background(), target, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was pushed") {
				t.Fatalf("got %v, want an error with %q and 'nothing was pushed'", err, tc.want)
			}
			assertEmpty(t, target, to)
		})
	}
	// With the right key pinned, the same origin mirrors.
	target, to := layout(t)
	opts := mirrorOptions(org, ca, to)
	opts.TrustedKeys = openpgp.EntityList{org.Key}
	if _, err := Mirror(context.Background(), target, opts); err != nil {
		t.Fatal(err)
	}
}

// assertEmpty fails unless the layout holds no tag and no blob.
func assertEmpty(t *testing.T, target oci.Target, to oci.Ref) {
	t.Helper()
	tags, err := artifact.ListVersions(context.Background(), target, oci.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) > 0 {
		t.Errorf("tags were pushed: %v", tags)
	}
	filepath.WalkDir(filepath.Join(to.Layout, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("a blob was pushed: %s", p)
		}
		return nil
	})
}

// TestMirrorProgressStaysWithinItsPlan: mirroring plans each download (from its Content-Length)
// before its bytes arrive, and each upload before it is sent, and ends with everything planned
// moved.
func TestMirrorProgressStaysWithinItsPlan(t *testing.T) {
	org, ca := testOrigin(t)
	target, to := layout(t)
	p := &progresstest.PlanCheck{T: t}
	opts := mirrorOptions(org, ca, to)
	opts.Progress = p
	if _, err := Mirror(context.Background(), target, opts); err != nil {
		t.Fatal(err)
	}
	if planned, done := p.Totals(); done == 0 || done != planned {
		t.Errorf("moved %d bytes of %d planned", done, planned)
	}
}
