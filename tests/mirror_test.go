package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	origin "github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// originConfig requires examples/hello from a test origin.
func originConfig(addr string) string {
	return strings.Replace(helloConfig, `source  = "example.com/acme/hello"`, `source  = "`+addr+`"`, 1)
}

// TestMirrorFromOrigin: tofu installs straight from a test origin (so the origin is faithful);
// oprov mirror then copies it into OCI, and tofu installs the same h1: from there.
func TestMirrorFromOrigin(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	ca := testreg.NewCA(t, t.TempDir())
	reg := testreg.Start(t, testreg.Options{CA: ca})
	org := origin.Start(t, ca, helloRelease(t), "acme", "hello", "1.0.0")
	env := []string{"SSL_CERT_FILE=" + ca.File, "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE="}
	host := helloPlatforms[0]

	direct := t.TempDir()
	writeFile(t, filepath.Join(direct, "main.tf"), originConfig(org.Address()))
	mustTofu(t, tofu, direct, env, "init", "-input=false")
	directHashes := lockHashes(t, filepath.Join(direct, ".terraform.lock.hcl"), org.Address())
	if !contains(directHashes, helloHashes[host].H1) {
		t.Fatalf("tofu's direct install from the test origin locked %v, not the release's h1 %s: the origin is not faithful", directHashes, helloHashes[host].H1)
	}

	to := reg.Host + "/mirror/acme/hello"
	r := mustOprov(t, env, "mirror", org.Address(), "--version", "~> 1.0", "--to", to, "-o", "json")
	var out struct {
		Versions []struct {
			Version  string
			Skipped  bool
			Uploaded int
			KeyID    string `json:"gpg_key_id"`
		}
	}
	decodeJSON(t, r.Stdout, &out)
	if len(out.Versions) != 1 || out.Versions[0].Skipped || out.Versions[0].Uploaded == 0 || out.Versions[0].KeyID != origin.KeyID(org.Key) {
		t.Fatalf("mirror: %s", r.Stdout)
	}
	r = mustOprov(t, env, "mirror", org.Address(), "--version", "~> 1.0", "--to", to, "-o", "json")
	decodeJSON(t, r.Stdout, &out)
	if !out.Versions[0].Skipped {
		t.Errorf("a second mirror did not skip the identical version: %s", r.Stdout)
	}

	expectIndexH1(t, env, to+":1.0.0")

	// The origin's signed SHA256SUMS travels as a referrer.
	r = mustOprov(t, env, "discover", to+":1.0.0", "-o", "json")
	var disc struct {
		Referrers []struct {
			ArtifactType string `json:"artifact_type"`
			Files        []string
		}
	}
	decodeJSON(t, r.Stdout, &disc)
	if len(disc.Referrers) != 1 || disc.Referrers[0].ArtifactType != "application/vnd.oprov.provider-shasums.v1" || len(disc.Referrers[0].Files) != 3 {
		t.Errorf("discover: %s", r.Stdout)
	}

	viaOCI := t.TempDir()
	writeFile(t, filepath.Join(viaOCI, "main.tf"), originConfig(org.Address()))
	rc := filepath.Join(t.TempDir(), "tofurc")
	writeFile(t, rc, "provider_installation {\n  oci_mirror {\n    repository_template = \""+reg.Host+"/mirror/${namespace}/${type}\"\n    include = [\""+org.Address()+"\"]\n  }\n}\n")
	mustTofu(t, tofu, viaOCI, append(env, "TF_CLI_CONFIG_FILE="+rc), "init", "-input=false")
	var h1Direct, h1OCI []string
	for _, h := range directHashes {
		if strings.HasPrefix(h, "h1:") {
			h1Direct = append(h1Direct, h)
		}
	}
	for _, h := range lockHashes(t, filepath.Join(viaOCI, ".terraform.lock.hcl"), org.Address()) {
		if strings.HasPrefix(h, "h1:") {
			h1OCI = append(h1OCI, h)
		}
	}
	if len(h1OCI) != 1 || !contains(h1Direct, h1OCI[0]) {
		t.Errorf("the OCI install locked h1 %v; the direct install locked %v", h1OCI, h1Direct)
	}
}

// TestMirrorRefuses: a bad SHA256SUMS signature, a zip that disagrees with SHA256SUMS, and a
// signing key swapped for another are refused with nothing pushed.
func TestMirrorRefuses(t *testing.T) {
	ca := testreg.NewCA(t, t.TempDir())
	reg := testreg.Start(t, testreg.Options{CA: ca})
	org := origin.Start(t, ca, helloRelease(t), "acme", "hello", "1.0.0")
	env := []string{"SSL_CERT_FILE=" + ca.File}
	pinned := filepath.Join(t.TempDir(), "origin.asc")
	writeFile(t, pinned, origin.Armor(t, org.Key))
	other := filepath.Join(t.TempDir(), "other.asc")
	writeFile(t, other, origin.Armor(t, origin.NewKey(t, "not the signer")))
	for i, tc := range []struct {
		name   string
		faults origin.Faults
		extra  []string
		want   string
	}{
		{"bad SHA256SUMS signature", origin.Faults{BadSignature: true}, nil, "signature does not verify"},
		{"zip that disagrees with SHA256SUMS", origin.Faults{TamperZip: true}, nil, "does not match the signed SHA256SUMS"},
		{"signing key swapped for another", origin.Faults{SwapKey: true}, nil, "signature does not verify with the origin's signing keys"},
		{"signer not among the pinned keys", origin.Faults{}, []string{"--gpg-key", other}, "pinned signing keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			org.SetFaults(tc.faults)
			defer org.SetFaults(origin.Faults{})
			repo := "refused/case" + string(rune('a'+i)) + "/hello"
			r := oprov(t, env, append([]string{"mirror", org.Address(), "--to", reg.Host + "/" + repo}, tc.extra...)...)
			if r.Code != 1 || !strings.Contains(r.Stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %q", r.Code, r.Stderr, tc.want)
			}
			if reg.RepoExists(repo) {
				t.Errorf("a refused mirror pushed to %s", repo)
			}
		})
	}
	// With the right key pinned, the same origin mirrors.
	mustOprov(t, env, "mirror", org.Address(), "--to", reg.Host+"/pinned/hello", "--gpg-key", pinned)
}

// TestSaveLoadKeepsProvenance: a version signed in both cosign forms, saved on one registry and
// loaded into another, still passes oprov verify, cosign verify and tofu init there. A corrupted
// tarball is refused before anything is pushed.
func TestSaveLoadKeepsProvenance(t *testing.T) {
	peers.Require(t, "tofu")
	ca := testreg.NewCA(t, t.TempDir())
	connected := testreg.Start(t, testreg.Options{CA: ca})
	airgapped := testreg.Start(t, testreg.Options{CA: ca})
	keys := t.TempDir()
	env := []string{"SSL_CERT_FILE=" + ca.File, "COSIGN_PASSWORD=test-password", "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE="}
	mustOprov(t, env, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	writeFile(t, filepath.Join(keys, "empty-root.json"), `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
	src := connected.Host + "/providers/acme/hello"
	p := pushJSON(t, env, helloRelease(t), src, "--address", "example.com/acme/hello", "--sign", "--key", filepath.Join(keys, "cosign.key"))
	// The legacy form too, made by the stock cosign CLI.
	if out, err := cosignCLI(t, connected, keys, append(cosignSignDefault, src+"@"+p.IndexDigest)...); err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	sbom := filepath.Join(t.TempDir(), "sbom.spdx.json")
	writeFile(t, sbom, `{"spdxVersion":"SPDX-2.3"}`)
	mustOprov(t, env, "attach", src+":1.0.0", "--artifact-type", "application/spdx+json", sbom)

	tarball := filepath.Join(t.TempDir(), "hello.tar")
	mustOprov(t, env, "save", src+":1.0.0", "--to", tarball)

	t.Run("a corrupted tarball is refused before anything is pushed", func(t *testing.T) {
		data, err := os.ReadFile(tarball)
		if err != nil {
			t.Fatal(err)
		}
		// Flip a byte in the middle of the largest blob (a zip): the tar stays readable.
		data[len(data)/2] ^= 0xff
		bad := filepath.Join(t.TempDir(), "bad.tar")
		os.WriteFile(bad, data, 0o644)
		r := oprov(t, env, "load", bad, "--to", airgapped.Host+"/corrupt")
		if r.Code != 1 || !strings.Contains(r.Stderr, "nothing was pushed") {
			t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
		}
		if airgapped.RepoExists("corrupt/providers/acme/hello") {
			t.Errorf("a corrupted tarball pushed content")
		}
	})

	mustOprov(t, env, "load", tarball, "--to", airgapped.Host+"/airgap", "--key", filepath.Join(keys, "cosign.pub"))
	dst := airgapped.Host + "/airgap/providers/acme/hello"
	r := mustOprov(t, env, "verify", dst+":1.0.0", "--key", filepath.Join(keys, "cosign.pub"), "-o", "json")
	var v struct {
		Verified bool
		Result   struct {
			Signatures []struct{ Form string }
		}
	}
	decodeJSON(t, r.Stdout, &v)
	forms := map[string]bool{}
	for _, s := range v.Result.Signatures {
		forms[s.Form] = true
	}
	if !v.Verified || !forms["bundle"] || !forms["legacy-tag"] {
		t.Errorf("after load, verify found %v: %s", forms, r.Stdout)
	}
	if out, err := cosignCLI(t, airgapped, keys, append(cosignVerifyBundle, dst+":1.0.0")...); err != nil {
		t.Errorf("stock cosign verify after load: %v\n%s", err, out)
	}
	r = mustOprov(t, env, "discover", dst+":1.0.0", "-o", "json")
	if !strings.Contains(r.Stdout, "application/spdx+json") {
		t.Errorf("the SBOM did not travel: %s", r.Stdout)
	}
	rc := strings.Replace(p.TofuRC, connected.Host+"/providers", airgapped.Host+"/airgap/providers", 1)
	if rc == p.TofuRC {
		t.Fatalf("could not point the CLI config at the air-gapped registry:\n%s", rc)
	}
	tofuApplyHello(t, rc, ca.File)
}

// expectIndexH1 checks that a version of examples/hello records each platform's h1: on its index,
// as push and mirror write it.
func expectIndexH1(t *testing.T, env []string, ref string) {
	t.Helper()
	r := mustOprov(t, env, "inspect", ref, "-o", "json")
	var ins struct{ Platforms []packagedHashes }
	decodeJSON(t, r.Stdout, &ins)
	if len(ins.Platforms) != len(helloPlatforms) {
		t.Errorf("inspect of %s: %s", ref, r.Stdout)
	}
	for _, p := range ins.Platforms {
		if p.H1 != helloHashes[p.Platform].H1 {
			t.Errorf("%s records h1 %q for %s, want %s", ref, p.H1, p.Platform, helloHashes[p.Platform].H1)
		}
	}
}
