package tests

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/sigstack"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

var (
	releaseWorkflow = sigstack.Workflow{Repository: "acme/providers", Workflow: ".github/workflows/release.yml", Ref: "refs/tags/v1.0.0", Event: "push"}
	nightlyWorkflow = sigstack.Workflow{Repository: "acme/providers", Workflow: ".github/workflows/nightly.yml", Ref: "refs/heads/main", Event: "schedule"}
)

// cosign3 runs the cosign v3 CLI with the registry's CA trusted.
func cosign3(t *testing.T, st *sigstack.Stack, reg *testreg.Registry, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(st.Cosign3, args...)
	cmd.Dir = st.Dir
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+reg.CAFile, "HOME="+st.Dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// cosign3SignKeyless signs ref (REPO@DIGEST) keylessly, as a CI job runs cosign v3.
func cosign3SignKeyless(t *testing.T, st *sigstack.Stack, reg *testreg.Registry, w sigstack.Workflow, ref string, extra ...string) {
	t.Helper()
	args := append([]string{"sign", "--signing-config", st.SigningConfig, "--trusted-root", st.TrustedRoot,
		"--identity-token", st.Token(t, w), "--yes"}, extra...)
	if out, err := cosign3(t, st, reg, append(args, ref)...); err != nil {
		t.Fatalf("cosign v3 sign keyless: %v\n%s\n%s", err, out, st.Logs())
	}
}

// keylessFlags are oprov verify's flags that trust workflow w under st's trusted root.
func keylessFlags(st *sigstack.Stack, w sigstack.Workflow) []string {
	return []string{"--trusted-root", st.TrustedRoot, "--certificate-identity", w.Subject(), "--certificate-oidc-issuer", st.Issuer.URL}
}

// TestKeylessInteroperatesWithCosign: cosign v3 signs keylessly against Fulcio and the TSA on
// 127.0.0.1 and oprov verifies under an identity rule, offline; oprov signs keylessly and cosign
// v3 verifies; each refusal names its cause.
func TestKeylessInteroperatesWithCosign(t *testing.T) {
	st := sigstack.Start(t)
	reg := testreg.Start(t, testreg.Options{})
	const repo = "providers/acme/hello"
	R := reg.Host + "/" + repo
	ca := []string{"--ca-file", reg.CAFile}

	d100 := versionedHello(t, reg, repo, "1.0.0")
	cosign3SignKeyless(t, st, reg, releaseWorkflow, R+"@"+d100)
	d110 := versionedHello(t, reg, repo, "1.1.0")
	cosign3SignKeyless(t, st, reg, nightlyWorkflow, R+"@"+d110)

	t.Run("cosign v3 signs keyless, oprov verify accepts under an identity rule", func(t *testing.T) {
		r := mustOprov(t, nil, append(append([]string{"verify", R + ":1.0.0", "-o", "json"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
		expectVerified(t, r.Stdout, "bundle", d100)
		var out struct {
			Result struct {
				Signatures []struct {
					Signer struct{ Subject, Issuer, Repository string }
				}
			}
		}
		decodeJSON(t, r.Stdout, &out)
		if s := out.Result.Signatures; len(s) != 1 || s[0].Signer.Subject != releaseWorkflow.Subject() || s[0].Signer.Issuer != st.Issuer.URL {
			t.Errorf("the JSON does not name the identity that signed: %s", r.Stdout)
		}
		r = mustOprov(t, nil, append([]string{"verify", R + ":1.0.0",
			"--certificate-identity-regexp", `^https://github\.com/acme/providers/\.github/workflows/release\.yml@refs/tags/v`,
			"--certificate-oidc-issuer-regexp", `^http://127\.0\.0\.1:[0-9]+$`,
			"--certificate-github-workflow-repository", "acme/providers", "--certificate-github-workflow-trigger", "push",
			"--certificate-github-workflow-ref", "refs/tags/v1.0.0", "--trusted-root", st.TrustedRoot}, ca...)...)
		if !strings.Contains(r.Stdout, "by "+releaseWorkflow.Subject()+" (issuer "+st.Issuer.URL) || !strings.Contains(r.Stdout, "keyless") {
			t.Errorf("verify output does not name the identity that signed:\n%s", r.Stdout)
		}
		if !strings.Contains(r.Stdout, "signing time proven by timestamp authority "+st.TSAURL+" at ") {
			t.Errorf("verify output does not say what proved the signing time:\n%s", r.Stdout)
		}
		t.Logf("oprov verify:\n%s", r.Stdout)
	})

	t.Run("a trust policy with an identity rule", func(t *testing.T) {
		pol := filepath.Join(t.TempDir(), "policy.hcl")
		writeFile(t, pol, keylessPolicy(st, `"`+reg.Host+`/providers/acme/*"`))
		r := mustOprov(t, nil, append([]string{"verify", R + ":1.0.0", "--policy", pol}, ca...)...)
		if !strings.Contains(r.Stdout, `trusted by rule "acme-release"`) || !strings.Contains(r.Stdout, releaseWorkflow.Subject()) {
			t.Errorf("policy verify output:\n%s", r.Stdout)
		}
		r = oprov(t, nil, append([]string{"verify", R + ":1.1.0", "--policy", pol}, ca...)...)
		if r.Code != 10 || !strings.Contains(r.Stderr, nightlyWorkflow.Subject()) || !strings.Contains(r.Stderr, "not a trusted identity") {
			t.Errorf("another workflow's signature under the policy: exit %d\n%s", r.Code, r.Stderr)
		}
	})

	t.Run("refusals name the cause", func(t *testing.T) {
		refuse := func(t *testing.T, want []string, args ...string) {
			t.Helper()
			r := oprov(t, nil, append(args, ca...)...)
			if r.Code == 0 {
				t.Fatalf("accepted: %s", r.Stdout)
			}
			t.Logf("refused: %s", r.Stderr)
			for _, w := range want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("message lacks %q:\n%s", w, r.Stderr)
				}
			}
		}
		t.Run("another workflow", func(t *testing.T) {
			refuse(t, []string{"not a trusted identity", "keyless signature by " + nightlyWorkflow.Subject(), "issuer " + st.Issuer.URL, "trusted: subject " + releaseWorkflow.Subject()},
				append([]string{"verify", R + ":1.1.0"}, keylessFlags(st, releaseWorkflow)...)...)
		})
		t.Run("another issuer", func(t *testing.T) {
			refuse(t, []string{"not a trusted identity", "(issuer " + st.Issuer.URL, "issuer https://token.actions.githubusercontent.com"},
				"verify", R+":1.0.0", "--trusted-root", st.TrustedRoot, "--certificate-identity", releaseWorkflow.Subject(),
				"--certificate-oidc-issuer", "https://token.actions.githubusercontent.com")
		})
		t.Run("another repository claim", func(t *testing.T) {
			refuse(t, []string{"not a trusted identity", "repository acme/providers", "repository acme/other"},
				append([]string{"verify", R + ":1.0.0", "--certificate-github-workflow-repository", "acme/other"}, keylessFlags(st, releaseWorkflow)...)...)
		})
		t.Run("missing trusted root", func(t *testing.T) {
			refuse(t, []string{"needs a trusted root", "--trusted-root"},
				"verify", R+":1.0.0", "--certificate-identity", releaseWorkflow.Subject(), "--certificate-oidc-issuer", st.Issuer.URL)
		})
		t.Run("untrusted CA", func(t *testing.T) {
			other := otherFulcioRoot(t, st)
			refuse(t, []string{"does not chain to a certificate authority of " + other},
				"verify", R+":1.0.0", "--trusted-root", other, "--certificate-identity", releaseWorkflow.Subject(), "--certificate-oidc-issuer", st.Issuer.URL)
		})
		t.Run("no trusted time", func(t *testing.T) {
			// The same signature with its RFC 3161 timestamp removed (it is not signed over), in a
			// repository of its own holding the same version.
			repo2 := "providers/acme/notime"
			if d := versionedHello(t, reg, repo2, "1.0.0"); d != d100 {
				t.Fatalf("the same release pushed again has index %s, not %s", d, d100)
			}
			copyBundle(t, reg, repo, repo2, d100, func(b map[string]any) {
				delete(b["verificationMaterial"].(map[string]any), "timestampVerificationData")
			})
			refuse(t, []string{"no trusted time", "valid " /* the certificate's window */},
				append([]string{"verify", reg.Host + "/" + repo2 + ":1.0.0"}, keylessFlags(st, releaseWorkflow)...)...)
		})
		t.Run("tampered bundle", func(t *testing.T) {
			// The release workflow's signature over 1.0.0, edited to name 1.1.0 and attached to it.
			repo3 := "providers/acme/tampered"
			versionedHello(t, reg, repo3, "1.0.0")
			if d := versionedHello(t, reg, repo3, "1.1.0"); d != d110 {
				t.Fatalf("the same release pushed again has index %s, not %s", d, d110)
			}
			copyBundleTo(t, reg, repo, repo3, d100, d110, func(b map[string]any) {
				env := b["dsseEnvelope"].(map[string]any)
				payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
				payload = bytes.ReplaceAll(payload, []byte(strings.TrimPrefix(d100, "sha256:")), []byte(strings.TrimPrefix(d110, "sha256:")))
				env["payload"] = base64.StdEncoding.EncodeToString(payload)
			})
			refuse(t, []string{"the signature does not verify", "altered"},
				append([]string{"verify", reg.Host + "/" + repo3 + ":1.1.0"}, keylessFlags(st, releaseWorkflow)...)...)
		})
	})

	t.Run("oprov sign keyless, cosign v3 and v2 verify accept", func(t *testing.T) {
		versionedHello(t, reg, repo, "1.2.0")
		r := mustOprov(t, []string{"SIGSTORE_ID_TOKEN=" + st.Token(t, releaseWorkflow)}, append([]string{"sign", R + ":1.2.0",
			"--signing-config", st.SigningConfig, "--trusted-root", st.TrustedRoot}, ca...)...)
		if !strings.Contains(r.Stdout, "keyless, by "+releaseWorkflow.Subject()) {
			t.Errorf("sign output does not name the identity:\n%s", r.Stdout)
		}
		out, err := cosign3(t, st, reg, "verify", "--trusted-root", st.TrustedRoot, "--certificate-identity", releaseWorkflow.Subject(),
			"--certificate-oidc-issuer", st.Issuer.URL, "--insecure-ignore-tlog", "--insecure-ignore-sct", R+":1.2.0")
		if err != nil {
			t.Fatalf("cosign v3 verify of oprov's keyless signature: %v\n%s", err, out)
		}
		// Control: cosign refuses it under another identity, so the acceptance above means something.
		out, err = cosign3(t, st, reg, "verify", "--trusted-root", st.TrustedRoot, "--certificate-identity", nightlyWorkflow.Subject(),
			"--certificate-oidc-issuer", st.Issuer.URL, "--insecure-ignore-tlog", "--insecure-ignore-sct", R+":1.2.0")
		if err == nil {
			t.Errorf("control: cosign accepted oprov's signature under another identity:\n%s", out)
		}
		// cosign v2 reads the same bundle with --new-bundle-format.
		cmd := exec.Command(peers.Require(t, "cosign"), "verify", "--new-bundle-format", "--trusted-root", st.TrustedRoot,
			"--certificate-identity", releaseWorkflow.Subject(), "--certificate-oidc-issuer", st.Issuer.URL,
			"--insecure-ignore-tlog", "--insecure-ignore-sct", R+":1.2.0")
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+reg.CAFile, "HOME="+st.Dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cosign v2 verify --new-bundle-format of oprov's keyless signature: %v\n%s", err, out)
		}
		// The flags instead of the signing config, the token as a flag.
		versionedHello(t, reg, repo, "1.3.0")
		mustOprov(t, nil, append([]string{"sign", R + ":1.3.0", "--identity-token", st.Token(t, releaseWorkflow),
			"--fulcio-url", st.FulcioURL, "--timestamp-server-url", st.TSAURL}, ca...)...)
		mustOprov(t, nil, append(append([]string{"verify", R + ":1.3.0"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
	})

	t.Run("cosign v2 signs keyless (.sig tag, oci-1-1 referrer), oprov verify accepts", func(t *testing.T) {
		cosign2 := peers.Require(t, "cosign")
		for _, f := range []struct {
			version, form string
			extra         []string
		}{
			{"1.4.0", "legacy-tag", nil},
			{"1.5.0", "simple-signing-referrer", []string{"--registry-referrers-mode=oci-1-1"}},
		} {
			d := versionedHello(t, reg, repo, f.version)
			// cosign v2 reads no signing config: the URLs as flags, the TSA's timestamp in the
			// .sig layer's annotations, no Rekor; it checks no SCT (none here) with --insecure-skip-verify.
			args := append([]string{"sign", "--fulcio-url", st.FulcioURL, "--identity-token", st.Token(t, releaseWorkflow),
				"--tlog-upload=false", "--timestamp-server-url", st.TSAURL, "--insecure-skip-verify=true", "--yes"}, f.extra...)
			cmd := exec.Command(cosign2, append(args, R+"@"+d)...)
			cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+reg.CAFile, "HOME="+st.Dir, "SIGSTORE_ROOT_FILE="+st.FulcioChain, "COSIGN_EXPERIMENTAL=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cosign v2 sign keyless: %v\n%s\n%s", err, out, st.Logs())
			}
			r := mustOprov(t, nil, append(append([]string{"verify", R + ":" + f.version, "-o", "json"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
			expectVerified(t, r.Stdout, f.form, d)
			if !strings.Contains(r.Stdout, releaseWorkflow.Subject()) {
				t.Errorf("the identity is not named: %s", r.Stdout)
			}
			r = oprov(t, nil, append(append([]string{"verify", R + ":" + f.version}, keylessFlags(st, nightlyWorkflow)...), ca...)...)
			if r.Code != 10 || !strings.Contains(r.Stderr, "keyless signature by "+releaseWorkflow.Subject()) {
				t.Errorf("%s under another identity: exit %d\n%s", f.form, r.Code, r.Stderr)
			}
		}
	})

	t.Run("save, then load across the gap under an identity rule", func(t *testing.T) {
		dir := t.TempDir()
		for _, v := range []string{"1.0.0", "1.1.0"} {
			mustOprov(t, nil, append([]string{"save", R + ":" + v, "--to", filepath.Join(dir, v+".tar")}, ca...)...)
		}
		r := mustOprov(t, nil, append(append([]string{"load", filepath.Join(dir, "1.0.0.tar"), "--to", reg.Host + "/airgap"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
		if !strings.Contains(r.Stdout+r.Stderr, "by one of the keyless identity subject "+releaseWorkflow.Subject()) {
			t.Errorf("load does not say what it checked:\n%s\n%s", r.Stdout, r.Stderr)
		}
		mustOprov(t, nil, append(append([]string{"verify", reg.Host + "/airgap/" + repo + ":1.0.0"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
		r = oprov(t, nil, append(append([]string{"load", filepath.Join(dir, "1.1.0.tar"), "--to", reg.Host + "/airgap2"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "keyless signature by "+nightlyWorkflow.Subject()) {
			t.Errorf("load of the nightly workflow's version: exit %d\n%s", r.Code, r.Stderr)
		}
	})

	t.Run("verification makes no request beyond the registry", func(t *testing.T) {
		before := st.Issuer.Requests()
		st.Stop() // Fulcio, the TSA and the issuer are gone: only the registry and the files remain
		// Any request for a host beyond loopback (sigstore's public TUF, a log, a CA) made through
		// Go's usual proxy settings lands here and is counted.
		var proxied atomic.Int32
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			proxied.Add(1)
			t.Logf("proxied: %s %s", r.Method, r.Host)
			http.Error(w, "offline", http.StatusBadGateway)
		}))
		defer proxy.Close()
		r := mustOprov(t, []string{"OPROV_DEBUG_HTTP=1", "HTTPS_PROXY=" + proxy.URL, "HTTP_PROXY=" + proxy.URL},
			append(append([]string{"verify", R + ":1.0.0"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
		if n := proxied.Load(); n != 0 {
			t.Errorf("%d request(s) for hosts beyond the registry", n)
		}
		// Control: cosign v3 without a trusted root asks sigstore's public TUF repository, and
		// the proxy sees it, so the zero above means something.
		cmd := exec.Command(st.Cosign3, "verify", "--certificate-identity", releaseWorkflow.Subject(), "--certificate-oidc-issuer", st.Issuer.URL, R+":1.0.0")
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+reg.CAFile, "HOME="+t.TempDir(), "HTTPS_PROXY="+proxy.URL, "HTTP_PROXY="+proxy.URL)
		cmd.CombinedOutput()
		if proxied.Load() == 0 {
			t.Errorf("control: cosign's TUF request did not reach the counting proxy")
		}
		tr := traceOf(r.Stderr)
		if len(tr.Requests) == 0 {
			t.Fatalf("no request traced: the count proves nothing\n%s", r.Stderr)
		}
		for _, req := range tr.Requests {
			if !strings.Contains(req, "://"+reg.Host+"/") {
				t.Errorf("request beyond the registry: %s", req)
			}
		}
		if st.Issuer.Requests() != before {
			t.Errorf("the issuer was asked during verification")
		}
		t.Logf("keyless verify: %d requests, all to the registry", len(tr.Requests))
	})
}

// keylessPolicy is a trust policy whose rule for repositories trusts the release workflow.
func keylessPolicy(st *sigstack.Stack, repositories string) string {
	return fmt.Sprintf(`trusted_root = %q

trust "acme-release" {
  repositories = [%s]
  identity {
    issuer         = %q
    subject_regexp = "^https://github.com/acme/providers/[.]github/workflows/release[.]yml@refs/tags/v.*$"
    repository     = "acme/providers"
    trigger        = "push"
  }
}
`, st.TrustedRoot, repositories, st.Issuer.URL)
}

// otherFulcioRoot writes a trusted root whose Fulcio CA is one of ours, not the running Fulcio's
// (the TSA is the same), as cosign trusted-root create writes it.
func otherFulcioRoot(t *testing.T, st *sigstack.Stack) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "not-fulcio"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	chain := filepath.Join(dir, "other-ca.pem")
	writeFile(t, chain, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	out := filepath.Join(dir, "other_root.json")
	if msg, err := exec.Command(st.Cosign3, "trusted-root", "create", "--fulcio=url=http://127.0.0.1:1,certificate-chain="+chain,
		"--tsa=url="+st.TSAURL+",certificate-chain="+st.TSAChain, "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("cosign trusted-root create: %v\n%s", err, msg)
	}
	return out
}

// copyBundle copies the bundle referrer of subject in repo to the same subject in repo2, edited.
func copyBundle(t *testing.T, reg *testreg.Registry, repo, repo2, subject string, edit func(map[string]any)) {
	copyBundleTo(t, reg, repo, repo2, subject, subject, edit)
}

// copyBundleTo copies the bundle referrer of subject in repo to another subject in repo2, with
// the bundle edited, through the registry API as anyone with push access could.
func copyBundleTo(t *testing.T, reg *testreg.Registry, repo, repo2, subject, newSubject string, edit func(map[string]any)) {
	t.Helper()
	c := reg.Client(t)
	get := func(path, accept string) []byte {
		req, _ := http.NewRequest("GET", reg.URL()+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s %s", path, resp.Status, body)
		}
		return body
	}
	put := func(path, ctype string, body []byte) {
		req, _ := http.NewRequest("PUT", reg.URL()+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			msg, _ := io.ReadAll(resp.Body)
			t.Fatalf("PUT %s: %s %s", path, resp.Status, msg)
		}
	}
	putBlob := func(data []byte) string {
		d := fmt.Sprintf("sha256:%x", sha256.Sum256(data))
		req, _ := http.NewRequest("POST", reg.URL()+"/v2/"+repo2+"/blobs/uploads/", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if !strings.HasPrefix(loc, "http") {
			loc = reg.URL() + loc
		}
		sep := "?"
		if strings.Contains(loc, "?") {
			sep = "&"
		}
		put(strings.TrimPrefix(loc, reg.URL())+sep+"digest="+d, "application/octet-stream", data)
		return d
	}
	var index struct {
		Manifests []struct {
			Digest       string `json:"digest"`
			ArtifactType string `json:"artifactType"`
		} `json:"manifests"`
	}
	// The distribution registry has no referrers API: cosign keeps the OCI referrers-tag fallback.
	json.Unmarshal(get("/v2/"+repo+"/manifests/"+strings.Replace(subject, ":", "-", 1), "application/vnd.oci.image.index.v1+json"), &index)
	for _, m := range index.Manifests {
		if !strings.Contains(m.ArtifactType, "sigstore.bundle") {
			continue
		}
		var man map[string]any
		json.Unmarshal(get("/v2/"+repo+"/manifests/"+m.Digest, "application/vnd.oci.image.manifest.v1+json"), &man)
		layer := man["layers"].([]any)[0].(map[string]any)
		var b map[string]any
		json.Unmarshal(get("/v2/"+repo+"/blobs/"+layer["digest"].(string), ""), &b)
		edit(b)
		data, _ := json.Marshal(b)
		layer["digest"], layer["size"] = putBlob(data), len(data)
		cfg := man["config"].(map[string]any)
		putBlob(get("/v2/"+repo+"/blobs/"+cfg["digest"].(string), ""))
		subj := man["subject"].(map[string]any)
		subj["digest"] = newSubject
		var idx []byte = get("/v2/"+repo2+"/manifests/"+newSubject, "application/vnd.oci.image.index.v1+json")
		subj["size"] = len(idx)
		mdata, _ := json.Marshal(man)
		mdigest := fmt.Sprintf("sha256:%x", sha256.Sum256(mdata))
		put("/v2/"+repo2+"/manifests/"+mdigest, "application/vnd.oci.image.manifest.v1+json", mdata)
		// And the referrers-tag fallback index that lists it, as cosign keeps it.
		fallback, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
			"manifests": []any{map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdigest, "size": len(mdata), "artifactType": m.ArtifactType}}})
		put("/v2/"+repo2+"/manifests/"+strings.Replace(newSubject, ":", "-", 1), "application/vnd.oci.image.index.v1+json", fallback)
		return
	}
	t.Fatalf("no bundle referrer of %s in %s", subject, repo)
}

// TestKeylessLoaderAndServe: under a policy that trusts the release workflow, oprov init
// installs the version it signed and refuses the one another workflow signed, and serve lists
// only the first. The Sigstore services are stopped before: all of it is offline.
func TestKeylessLoaderAndServe(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	st := sigstack.Start(t)
	reg := testreg.Start(t, testreg.Options{})
	const repo = "providers/acme/hello"
	R := reg.Host + "/" + repo
	cosign3SignKeyless(t, st, reg, releaseWorkflow, R+"@"+versionedHello(t, reg, repo, "1.0.0"))
	cosign3SignKeyless(t, st, reg, nightlyWorkflow, R+"@"+versionedHello(t, reg, repo, "1.1.0"))
	st.Stop()

	env := []string{"OPROV_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache"), "SSL_CERT_FILE=" + reg.CAFile, "HOME=" + t.TempDir(), "OPROV_TOFU=" + tofu}
	policy := filepath.Join(t.TempDir(), "policy.hcl")
	writeFile(t, policy, keylessPolicy(st, `"`+reg.Host+`/providers/acme/*"`))
	project := func(version string) string {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "main.tf"), strings.Replace(helloConfig, `version = "~> 1.0"`, `version = "`+version+`"`, 1))
		writeFile(t, filepath.Join(dir, "oprov.hcl"), fmt.Sprintf(`oci_mirror {
  repository_template = "%s/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
  policy              = %q
}
`, reg.Host, policy))
		return dir
	}

	installed := project("1.0.0")
	otherRoot := otherFulcioRoot(t, st) // here: the subtest's temporary directories hold commas
	t.Run("oprov init installs the release workflow's version", func(t *testing.T) {
		r := mustOprov(t, env, "init", "-C", installed)
		if !strings.Contains(r.Stdout, "Using previously-installed example.com/acme/hello v1.0.0") {
			t.Errorf("init did not install 1.0.0:\n%s\n%s", r.Stdout, r.Stderr)
		}
		if !strings.Contains(r.Stdout+r.Stderr, "signature verified with "+releaseWorkflow.Subject()) {
			t.Errorf("init does not name the identity that signed:\n%s\n%s", r.Stdout, r.Stderr)
		}
		// Again from the cache: its record of the keyless signer is matched against the rule anew.
		r = mustOprov(t, env, "init", "-C", project("1.0.0"))
		if strings.Contains(r.Stderr, "warning") || !strings.Contains(r.Stdout, "Using previously-installed example.com/acme/hello v1.0.0") {
			t.Errorf("init from the cache:\n%s\n%s", r.Stdout, r.Stderr)
		}
	})
	t.Run("an identity block in oci_mirror itself", func(t *testing.T) {
		block := func(version, workflow string) string {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "main.tf"), strings.Replace(helloConfig, `version = "~> 1.0"`, `version = "`+version+`"`, 1))
			writeFile(t, filepath.Join(dir, "oprov.hcl"), fmt.Sprintf(`oci_mirror {
  repository_template = "%s/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
  trusted_root        = %q
  identity {
    issuer  = %q
    subject = %q
  }
}
`, reg.Host, st.TrustedRoot, st.Issuer.URL, workflow))
			return dir
		}
		mustOprov(t, env, "install", "-C", block("1.0.0", releaseWorkflow.Subject()))
		r := oprov(t, env, "install", "-C", block("1.1.0", releaseWorkflow.Subject()))
		if r.Code == 0 || !strings.Contains(r.Stderr, "keyless signature by "+nightlyWorkflow.Subject()) {
			t.Errorf("install of the nightly workflow's version: exit %d\n%s", r.Code, r.Stderr)
		}
	})
	t.Run("oprov init refuses another workflow's version", func(t *testing.T) {
		r := oprov(t, env, "init", "-C", project("1.1.0"))
		if r.Code == 0 || !strings.Contains(r.Stderr, nightlyWorkflow.Subject()) || !strings.Contains(r.Stderr, "not a trusted identity") {
			t.Errorf("init of the nightly workflow's version: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
	})
	t.Run("serve lists only the release workflow's version", func(t *testing.T) {
		s := startServe(t, []string{"HOME=" + t.TempDir()}, false, append(serveFromRegistry(t, reg.Host, reg.CAFile), "--policy", policy)...)
		code, _, body := s.get(t, "example.com/acme/hello/index.json")
		var idx struct{ Versions map[string]any }
		json.Unmarshal(body, &idx)
		if code != 200 || len(idx.Versions) != 1 || idx.Versions["1.0.0"] == nil {
			t.Errorf("index.json: %d %s", code, body)
		}
		// The same with the identity as flags rather than a policy.
		s = startServe(t, []string{"HOME=" + t.TempDir()}, false, append(serveFromRegistry(t, reg.Host, reg.CAFile), keylessFlags(st, releaseWorkflow)...)...)
		code, _, body = s.get(t, "example.com/acme/hello/index.json")
		idx.Versions = nil
		json.Unmarshal(body, &idx)
		if code != 200 || len(idx.Versions) != 1 || idx.Versions["1.0.0"] == nil {
			t.Errorf("index.json, identity flags: %d %s", code, body)
		}
		// Control: without trust, both versions are listed.
		s = startServe(t, []string{"HOME=" + t.TempDir()}, false, serveFromRegistry(t, reg.Host, reg.CAFile)...)
		_, _, body = s.get(t, "example.com/acme/hello/index.json")
		idx.Versions = nil
		json.Unmarshal(body, &idx)
		if len(idx.Versions) != 2 {
			t.Errorf("control: index.json without trust: %s", body)
		}
	})
	t.Run("offline from the cache, the keyless signer is trusted again", func(t *testing.T) {
		reg.Stop()
		r := mustOprov(t, append(env, "OPROV_DEBUG_HTTP=1"), "init", "-C", installed)
		if strings.Contains(r.Stderr, "http: ") || strings.Contains(r.Stderr, "not verified") {
			t.Errorf("init from a warm cache:\n%s", r.Stderr)
		}
		// The cache keeps evidence, not verdicts: offline, a policy that now trusts another
		// identity, or another trusted root, refuses what the same cache just proved.
		for name, pol := range map[string]string{
			"another identity":     strings.Replace(keylessPolicy(st, `"`+reg.Host+`/providers/acme/*"`), "release[.]yml", "nightly[.]yml", 1),
			"another trusted root": strings.Replace(keylessPolicy(st, `"`+reg.Host+`/providers/acme/*"`), fmt.Sprintf("%q", st.TrustedRoot), fmt.Sprintf("%q", otherRoot), 1),
		} {
			writeFile(t, policy, pol)
			r := oprov(t, env, "install", "-C", installed)
			if r.Code == 0 || strings.Contains(r.Stdout, "signature verified") {
				t.Errorf("offline install under %s: exit %d\n%s%s", name, r.Code, r.Stdout, r.Stderr)
			}
		}
	})
}

// TestKeylessWithRekor: with a Rekor v2 (rekor-tiles, POSIX storage) on 127.0.0.1 as well,
// cosign v3 logs the signature; oprov verifies the log's inclusion proof offline against the
// trusted root, and cosign verifies it without --insecure-ignore-tlog.
func TestKeylessWithRekor(t *testing.T) {
	st := sigstack.StartWith(t, sigstack.Options{Rekor: true})
	reg := testreg.Start(t, testreg.Options{})
	const repo = "providers/acme/hello"
	R := reg.Host + "/" + repo
	ca := []string{"--ca-file", reg.CAFile}
	d := versionedHello(t, reg, repo, "1.0.0")
	cosign3SignKeyless(t, st, reg, releaseWorkflow, R+"@"+d)
	r := mustOprov(t, nil, append(append([]string{"verify", R + ":1.0.0", "-o", "json"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
	expectVerified(t, r.Stdout, "bundle", d)
	out, err := cosign3(t, st, reg, "verify", "--trusted-root", st.TrustedRoot, "--certificate-identity", releaseWorkflow.Subject(),
		"--certificate-oidc-issuer", st.Issuer.URL, "--insecure-ignore-sct", R+":1.0.0")
	if err != nil {
		t.Fatalf("cosign v3 verify with the transparency log: %v\n%s", err, out)
	}
	// The log entry is checked: the same bundle with its checkpoint's text changed is refused (in
	// a repository of its own holding the same version).
	repo2 := "providers/acme/badlog"
	if d2 := versionedHello(t, reg, repo2, "1.0.0"); d2 != d {
		t.Fatalf("the same release pushed again has index %s, not %s", d2, d)
	}
	copyBundle(t, reg, repo, repo2, d, func(b map[string]any) {
		entry := b["verificationMaterial"].(map[string]any)["tlogEntries"].([]any)[0].(map[string]any)
		cp := entry["inclusionProof"].(map[string]any)["checkpoint"].(map[string]any)
		cp["envelope"] = strings.Replace(cp["envelope"].(string), "127.0.0.1", "127.0.0.2", 1)
	})
	r = oprov(t, nil, append(append([]string{"verify", reg.Host + "/" + repo2 + ":1.0.0"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
	if r.Code != 10 || !strings.Contains(r.Stderr, "the transparency-log entry does not check") {
		t.Errorf("a bundle with a broken inclusion proof: exit %d\n%s", r.Code, r.Stderr)
	}
	t.Logf("refused: %s", r.Stderr)

	// oprov signs through the same signing config, Rekor v2 included; cosign verifies the log entry.
	versionedHello(t, reg, repo, "1.1.0")
	mustOprov(t, []string{"SIGSTORE_ID_TOKEN=" + st.Token(t, releaseWorkflow)}, append([]string{"sign", R + ":1.1.0",
		"--signing-config", st.SigningConfig, "--trusted-root", st.TrustedRoot}, ca...)...)
	out, err = cosign3(t, st, reg, "verify", "--trusted-root", st.TrustedRoot, "--certificate-identity", releaseWorkflow.Subject(),
		"--certificate-oidc-issuer", st.Issuer.URL, "--insecure-ignore-sct", R+":1.1.0")
	if err != nil {
		t.Fatalf("cosign v3 verify (with the transparency log) of oprov's keyless signature: %v\n%s", err, out)
	}
	mustOprov(t, nil, append(append([]string{"verify", R + ":1.1.0"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
}
