package tests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/refreg"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// cosignSignOCI11 is cosign v2's third form: the simple-signing signature stored as an OCI 1.1
// referrer (format.md §7); it needs COSIGN_EXPERIMENTAL=1.
var cosignSignOCI11 = []string{"sign", "--key", "cosign.key", "--tlog-upload=false", "--registry-referrers-mode=oci-1-1", "--yes"}

// verifyForm runs oprov verify on ref with the key in keys and checks that a signature of the
// given form over digest checked out.
func verifyForm(t *testing.T, keys, caFile, ref, form, digest string) {
	t.Helper()
	r := mustOprov(t, nil, "verify", ref, "--key", filepath.Join(keys, "cosign.pub"), "--ca-file", caFile, "-o", "json")
	expectVerified(t, r.Stdout, form, digest)
}

// TestNativeReferrers: on a registry with the native referrers API that answers OCI-Subject (as
// zot and Harbor do), oprov's signatures and cosign's oci-1-1 form are stored and found through
// the API (no referrers-tag fallback); cosign's oci-1-1 form verifies on the distribution
// registry (tag fallback) too, and through the loader; and copies to and from the distribution
// registry keep every signature, so verify passes at each destination.
func TestNativeReferrers(t *testing.T) {
	t.Setenv("COSIGN_EXPERIMENTAL", "1")
	ca := testreg.NewCA(t, t.TempDir())
	dist := testreg.Start(t, testreg.Options{CA: ca})
	native := refreg.Start(t, ca)
	keys := t.TempDir()
	pass := []string{"COSIGN_PASSWORD=test-password"}
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	const repo = "providers/acme/hello"
	N, D := native.Host+"/"+repo, dist.Host+"/"+repo
	digests := map[string]string{}

	t.Run("oprov sign and verify on the native registry", func(t *testing.T) {
		digests["1.0.0"] = pushVersion(t, native.Host, ca.File, repo, "1.0.0")
		mustOprov(t, pass, "sign", N+":1.0.0", "--key", filepath.Join(keys, "cosign.key"), "--ca-file", ca.File)
		verifyForm(t, keys, ca.File, N+":1.0.0", "bundle", digests["1.0.0"])
		if native.SubjectPuts() == 0 || native.ReferrersAPIGets() == 0 {
			t.Errorf("the referrers API was not used: %d subject PUTs, %d API GETs", native.SubjectPuts(), native.ReferrersAPIGets())
		}
		if tags := native.Tags(t, repo); hasTagLike(tags, "sha256-") {
			t.Errorf("a referrers-tag fallback was written on a registry with the API: %v", tags)
		}
	})
	t.Run("cosign's oci-1-1 form on the native registry", func(t *testing.T) {
		digests["1.1.0"] = pushVersion(t, native.Host, ca.File, repo, "1.1.0")
		if out, err := cosignCLI(t, dist, keys, append(cosignSignOCI11, N+"@"+digests["1.1.0"])...); err != nil {
			t.Fatalf("cosign sign: %v\n%s", err, out)
		}
		verifyForm(t, keys, ca.File, N+":1.1.0", "simple-signing-referrer", digests["1.1.0"])
	})
	t.Run("cosign's oci-1-1 form on the distribution registry, through verify and the loader", func(t *testing.T) {
		digests["1.2.0"] = pushVersion(t, dist.Host, ca.File, repo, "1.2.0")
		if out, err := cosignCLI(t, dist, keys, append(cosignSignOCI11, D+"@"+digests["1.2.0"])...); err != nil {
			t.Fatalf("cosign sign: %v\n%s", err, out)
		}
		if tags := registryTags(t, dist, repo); !hasTagLike(tags, "sha256-") || hasTagLike(tags, ".sig") {
			t.Fatalf("want cosign's signature in the referrers-tag fallback only, tags are %v", tags)
		}
		verifyForm(t, keys, ca.File, D+":1.2.0", "simple-signing-referrer", digests["1.2.0"])
		installSigned(t, dist.Host, ca.File, keys, "1.2.0")
	})
	t.Run("copy native -> distribution -> native keeps every signature", func(t *testing.T) {
		hops := []struct{ from, to string }{{N, D + "-copy"}, {D + "-copy", N + "-back"}}
		for _, h := range hops {
			for _, v := range []string{"1.0.0", "1.1.0"} {
				mustOprov(t, nil, "copy", h.from+":"+v, h.to, "--ca-file", ca.File)
			}
			verifyForm(t, keys, ca.File, h.to+":1.0.0", "bundle", digests["1.0.0"])
			verifyForm(t, keys, ca.File, h.to+":1.1.0", "simple-signing-referrer", digests["1.1.0"])
		}
		if tags := native.Tags(t, repo+"-back"); hasTagLike(tags, "sha256-") {
			t.Errorf("the copy back wrote a referrers-tag fallback on a registry with the API: %v", tags)
		}
	})
}

// installSigned installs a version through the loader from host with a policy that trusts only
// the key in keys, and checks that the signature was what let it in.
func installSigned(t *testing.T, host, caFile, keys, version string) {
	t.Helper()
	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(helloConfig, `"~> 1.0"`, `"= `+version+`"`, 1))
	writeFile(t, filepath.Join(cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", host, "%KEYS%", keys).Replace(oprovHCL))
	env := []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "SSL_CERT_FILE=" + caFile, "HOME=" + t.TempDir()}
	r := mustOprov(t, env, "install", "-C", cfg)
	if !strings.Contains(r.Stdout, "signature verified with "+filepath.Join(keys, "cosign.pub")) {
		t.Errorf("install did not verify the signature:\n%s", r.Stdout)
	}
}
