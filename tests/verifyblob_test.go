package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/sigstack"
	"github.com/oprov/oprov/tests/testkit/tufrepo"
)

// cosignIn runs a cosign CLI (bin) in dir, offline, with the test key's password.
func cosignIn(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=test-password", "HOME="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// blobVerified checks verify-blob's JSON answer: verified, the file, and who signed.
func blobVerified(t *testing.T, r result, file, key, subject string) {
	t.Helper()
	var out struct {
		Verified bool   `json:"verified"`
		File     string `json:"file"`
		Digest   string `json:"digest"`
		Key      string `json:"key"`
		Signer   struct {
			Subject string `json:"subject"`
		} `json:"signer"`
	}
	decodeJSON(t, r.Stdout, &out)
	if !out.Verified || out.File != file || !strings.HasPrefix(out.Digest, "sha256:") || out.Key != key || out.Signer.Subject != subject {
		t.Errorf("verify-blob answer: %s", r.Stdout)
	}
}

// blobRefused checks that verify-blob refused with code and a reason that says want.
func blobRefused(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.Code != code || !strings.Contains(r.Stderr, want) {
		t.Errorf("exit %d, want %d; stderr %q (want %q)", r.Code, code, r.Stderr, want)
	}
	t.Logf("refused: %s", r.Stderr)
}

// TestVerifyBlobInteroperatesWithCosign: what cosign v2 and v3 sign-blob write in the bundle
// format, with a key or keylessly (the local Fulcio and TSA, and Rekor), oprov verify-blob accepts, as
// cosign verify-blob does; a changed file, another key, another identity, a certificate of
// another CA and a broken log entry are refused with exit 10.
func TestVerifyBlobInteroperatesWithCosign(t *testing.T) {
	cosign2 := peers.Require(t, "cosign")
	cosign3 := peers.Require(t, "cosign3")
	dir := t.TempDir()
	pass := []string{"COSIGN_PASSWORD=test-password"}
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(dir, "cosign"))
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(dir, "other"))
	pub, otherPub := filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "other.pub")
	sums := filepath.Join(dir, "SHA256SUMS")
	writeFile(t, sums, "0123abcd  oprov_1.0.0_linux_amd64.tar.gz\n4567cdef  oprov_1.0.0_darwin_arm64.tar.gz\n")
	changed := filepath.Join(dir, "SHA256SUMS.changed")
	writeFile(t, changed, "0123abcd  oprov_1.0.0_linux_amd64.tar.gz\nbad0bad0  oprov_1.0.0_darwin_arm64.tar.gz\n")
	writeFile(t, filepath.Join(dir, "empty-root.json"), `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
	// cosign v3 takes its services from a signing config: one with none signs offline.
	writeFile(t, filepath.Join(dir, "offline.json"), `{"mediaType":"application/vnd.dev.sigstore.signingconfig.v0.2+json","caUrls":[],"oidcUrls":[],"rekorTlogUrls":[],"tsaUrls":[],"rekorTlogConfig":{"selector":"ANY"},"tsaConfig":{"selector":"ANY"}}`)

	for _, tc := range []struct {
		name, bin string
		args      []string
	}{
		{"cosign v2", cosign2, []string{"--tlog-upload=false", "--new-bundle-format"}},
		{"cosign v3", cosign3, []string{"--signing-config", "offline.json"}},
	} {
		t.Run(tc.name+" sign-blob with a key", func(t *testing.T) {
			bundle := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".bundle")
			args := append(append([]string{"sign-blob", "--key", "cosign.key", "--yes", "--bundle", bundle}, tc.args...), sums)
			if out, err := cosignIn(t, tc.bin, dir, args...); err != nil {
				t.Fatalf("cosign sign-blob: %v\n%s", err, out)
			}
			if out, err := cosignIn(t, cosign3, dir, "verify-blob", "--key", "cosign.pub", "--bundle", bundle, "--insecure-ignore-tlog", "--trusted-root", "empty-root.json", sums); err != nil {
				t.Fatalf("cosign verify-blob: %v\n%s", err, out)
			}
			blobVerified(t, mustOprov(t, nil, "verify-blob", sums, "--bundle", bundle, "--key", otherPub, "--key", pub, "-o", "json"), sums, pub, "")
			blobRefused(t, oprov(t, nil, "verify-blob", changed, "--bundle", bundle, "--key", pub), 10, "the file was changed")
			blobRefused(t, oprov(t, nil, "verify-blob", sums, "--bundle", bundle, "--key", otherPub), 10, "not by a trusted key (trusted: "+otherPub+")")
		})
	}

	t.Run("cosign's old bundle format and an attestation are refused saying so", func(t *testing.T) {
		bundle := filepath.Join(dir, "old.bundle")
		if out, err := cosignIn(t, cosign2, dir, "sign-blob", "--key", "cosign.key", "--tlog-upload=false", "--yes", "--bundle", bundle, sums); err != nil {
			t.Fatalf("cosign sign-blob: %v\n%s", err, out)
		}
		blobRefused(t, oprov(t, nil, "verify-blob", sums, "--bundle", bundle, "--key", pub), 10, "sign again with --new-bundle-format")
		att := filepath.Join(dir, "attestation.bundle")
		writeFile(t, filepath.Join(dir, "predicate.json"), `{"built_by":"ci"}`)
		if out, err := cosignIn(t, cosign3, dir, "attest-blob", "--key", "cosign.key", "--signing-config", "offline.json", "--trusted-root", "empty-root.json",
			"--predicate", "predicate.json", "--type", "https://example.com/build/v1", "--yes", "--bundle", att, sums); err != nil {
			t.Fatalf("cosign attest-blob: %v\n%s", err, out)
		}
		blobRefused(t, oprov(t, nil, "verify-blob", sums, "--bundle", att, "--key", pub), 10, "an attestation, or an image signature), not a signature over a file's bytes")
	})

	t.Run("keyless: cosign v2 and v3 with the local Fulcio, TSA and Rekor", func(t *testing.T) {
		st := sigstack.StartWith(t, sigstack.Options{Rekor: true})
		// cosign v3 signs twice: timestamped by the TSA alone, and logged in Rekor too.
		tsaOnly := filepath.Join(dir, "tsa-only.json")
		var sc map[string]any
		decodeJSON(t, readText(t, st.SigningConfig), &sc)
		sc["rekorTlogUrls"] = []any{}
		data, _ := json.Marshal(sc)
		writeFile(t, tsaOnly, string(data))
		type signed struct {
			bundle string
			logged bool
		}
		bundles := map[string]signed{
			"cosign v3, TSA":           {filepath.Join(dir, "keyless-tsa.bundle"), false},
			"cosign v3, TSA and Rekor": {filepath.Join(dir, "keyless-rekor.bundle"), true},
			"cosign v2, TSA":           {filepath.Join(dir, "keyless-v2.bundle"), false},
		}
		for config, b := range map[string]signed{tsaOnly: bundles["cosign v3, TSA"], st.SigningConfig: bundles["cosign v3, TSA and Rekor"]} {
			if out, err := cosignIn(t, cosign3, dir, "sign-blob", "--signing-config", config, "--trusted-root", st.TrustedRoot,
				"--identity-token", st.Token(t, releaseWorkflow), "--yes", "--bundle", b.bundle, sums); err != nil {
				t.Fatalf("cosign v3 sign-blob keyless: %v\n%s\n%s", err, out, st.Logs())
			}
		}
		// cosign v2 reads no signing config: the URLs as flags, Fulcio's root from SIGSTORE_ROOT_FILE.
		v2 := exec.Command(cosign2, "sign-blob", "--fulcio-url", st.FulcioURL, "--identity-token", st.Token(t, releaseWorkflow),
			"--tlog-upload=false", "--timestamp-server-url", st.TSAURL, "--insecure-skip-verify=true", "--new-bundle-format",
			"--yes", "--bundle", bundles["cosign v2, TSA"].bundle, sums)
		v2.Env = append(os.Environ(), "HOME="+st.Dir, "SIGSTORE_ROOT_FILE="+st.FulcioChain)
		if out, err := v2.CombinedOutput(); err != nil {
			t.Fatalf("cosign v2 sign-blob keyless: %v\n%s\n%s", err, out, st.Logs())
		}
		st.Stop() // what follows is offline
		// The trusted root crosses the air gap through TUF: oprov trusted-root fetches it from a
		// file:// mirror of a TUF repository that holds it, and verify-blob uses what it wrote.
		tufFiles, tufRoot := tufrepo.New(t, "trusted_root.json", []byte(readText(t, st.TrustedRoot)), tufrepo.Spec{})
		mirror := filepath.Join(dir, "tuf-mirror")
		tufrepo.WriteDir(t, mirror, tufFiles)
		writeFile(t, filepath.Join(dir, "tuf-root.json"), string(tufRoot))
		fetched := filepath.Join(dir, "fetched_trusted_root.json")
		r := mustOprov(t, []string{"OPROV_CACHE_DIR=" + filepath.Join(dir, "cache")}, "trusted-root", "--tuf-url", "file://"+filepath.ToSlash(mirror),
			"--tuf-root", filepath.Join(dir, "tuf-root.json"), "--to", fetched)
		if readText(t, fetched) != readText(t, st.TrustedRoot) || !strings.Contains(r.Stdout, "certificate authorities: 1") {
			t.Errorf("trusted-root wrote another file, or says:\n%s", r.Stdout)
		}
		// The same repository is one cosign reads: served on 127.0.0.1, 'cosign initialize' takes it
		// and cosign verify-blob, given no --trusted-root, gets the root through it.
		cosignHome := filepath.Join(dir, "cosign-tuf-home")
		cosignTUF := func(args ...string) {
			t.Helper()
			c := exec.Command(cosign3, args...)
			c.Env = append(os.Environ(), "HOME="+cosignHome)
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("cosign %s: %v\n%s", args[0], err, out)
			}
		}
		cosignTUF("initialize", "--mirror", tufrepo.Serve(t, tufFiles).URL, "--root", filepath.Join(dir, "tuf-root.json"))
		cosignTUF("verify-blob", "--bundle", bundles["cosign v3, TSA"].bundle, "--certificate-identity", releaseWorkflow.Subject(),
			"--certificate-oidc-issuer", st.Issuer.URL, "--insecure-ignore-sct", "--insecure-ignore-tlog", sums)
		for name, b := range bundles {
			bundle, logged := b.bundle, b.logged
			t.Run(name, func(t *testing.T) {
				if strings.Contains(readText(t, bundle), "tlogEntries") != logged {
					t.Fatalf("the bundle's log entries are not as signed (logged: %v):\n%s", logged, readText(t, bundle))
				}
				cosignArgs := []string{"verify-blob", "--bundle", bundle, "--trusted-root", st.TrustedRoot, "--certificate-identity", releaseWorkflow.Subject(),
					"--certificate-oidc-issuer", st.Issuer.URL, "--insecure-ignore-sct"}
				if !logged {
					cosignArgs = append(cosignArgs, "--insecure-ignore-tlog")
				}
				if out, err := cosignIn(t, cosign3, dir, append(cosignArgs, sums)...); err != nil {
					t.Fatalf("cosign verify-blob: %v\n%s", err, out)
				}
				r := mustOprov(t, nil, append([]string{"verify-blob", sums, "--bundle", bundle, "-o", "json"}, keylessFlags(st, releaseWorkflow)...)...)
				blobVerified(t, r, sums, "", releaseWorkflow.Subject())
				r = mustOprov(t, nil, append([]string{"verify-blob", sums, "--bundle", bundle, "--certificate-github-workflow-repository", "acme/providers"}, keylessFlags(st, releaseWorkflow)...)...)
				if !strings.Contains(r.Stdout, "signed keylessly by "+releaseWorkflow.Subject()) || !strings.Contains(r.Stdout, "signing time proven by timestamp authority "+st.TSAURL) ||
					strings.Contains(r.Stdout, "transparency-log entry checked against "+st.TrustedRoot) != logged {
					t.Errorf("verify-blob output:\n%s", r.Stdout)
				}
				blobVerified(t, mustOprov(t, nil, "verify-blob", sums, "--bundle", bundle, "-o", "json", "--trusted-root", fetched,
					"--certificate-identity", releaseWorkflow.Subject(), "--certificate-oidc-issuer", st.Issuer.URL), sums, "", releaseWorkflow.Subject())
				blobRefused(t, oprov(t, nil, append([]string{"verify-blob", sums, "--bundle", bundle}, keylessFlags(st, nightlyWorkflow)...)...), 10, "not a trusted identity")
				blobRefused(t, oprov(t, nil, append([]string{"verify-blob", changed, "--bundle", bundle}, keylessFlags(st, releaseWorkflow)...)...), 10, "the file was changed")
				blobRefused(t, oprov(t, nil, "verify-blob", sums, "--bundle", bundle, "--trusted-root", otherFulcioRoot(t, st),
					"--certificate-identity", releaseWorkflow.Subject(), "--certificate-oidc-issuer", st.Issuer.URL), 10, "does not chain to a certificate authority")
				blobRefused(t, oprov(t, nil, "verify-blob", sums, "--bundle", bundle, "--key", pub), 10, "signed keylessly by "+releaseWorkflow.Subject())
			})
		}
		// The log entry is checked: the Rekor bundle with its checkpoint's text changed is refused.
		var b map[string]any
		bundle := bundles["cosign v3, TSA and Rekor"].bundle
		decodeJSON(t, readText(t, bundle), &b)
		cp := b["verificationMaterial"].(map[string]any)["tlogEntries"].([]any)[0].(map[string]any)["inclusionProof"].(map[string]any)["checkpoint"].(map[string]any)
		cp["envelope"] = strings.Replace(cp["envelope"].(string), "127.0.0.1", "127.0.0.2", 1)
		data, _ = json.Marshal(b)
		badLog := filepath.Join(dir, "bad-log.bundle")
		writeFile(t, badLog, string(data))
		blobRefused(t, oprov(t, nil, append([]string{"verify-blob", sums, "--bundle", badLog}, keylessFlags(st, releaseWorkflow)...)...), 10, "the transparency-log entry does not check")
	})
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
