package sign

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// testTrustedRoot writes a trusted root with one self-made Fulcio CA, as cosign trusted-root
// create would, and returns its path.
func testTrustedRoot(t *testing.T, dir string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-fulcio", Organization: []string{"test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "trusted_root.json")
	doc := fmt.Sprintf(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1",
  "certificateAuthorities":[{"subject":{"organization":"test","commonName":"test-fulcio"},"uri":"http://127.0.0.1:1",
    "certChain":{"certificates":[{"rawBytes":%q}]},"validFor":{"start":"2020-01-01T00:00:00Z"}}]}`, base64.StdEncoding.EncodeToString(der))
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKeylessPolicy: identity blocks beside (or instead of) keys, with the trusted root at the
// top or in the rule; identities without a root, half identities and bad regexps are refused with
// what to write; NewPolicy turns flags' identities into one rule, and needs a root for them.
func TestKeylessPolicy(t *testing.T) {
	dir := t.TempDir()
	root := testTrustedRoot(t, dir)
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.hcl", `trusted_root = "trusted_root.json"
trust "release" {
  repositories = ["r.example/acme/*"]
  identity {
    issuer         = "https://token.actions.githubusercontent.com"
    subject_regexp = "^https://github.com/acme/providers/"
    repository     = "acme/providers"
    ref            = "refs/tags/v1.0.0"
    trigger        = "push"
  }
}
`)
	p, err := loadPolicy(good, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Match("r.example/acme/hello", "")
	if r == nil || len(r.Identities) != 1 || r.TrustedRoot == nil || len(r.Keys) != 0 {
		t.Fatalf("rule: %+v", r)
	}
	signer := CertSigner{Subject: "https://github.com/acme/providers/.github/workflows/release.yml@refs/tags/v1.0.0",
		Issuer: "https://token.actions.githubusercontent.com", Repository: "acme/providers", Ref: "refs/tags/v1.0.0", Trigger: "push"}
	if !r.TrustsSigner(signer) {
		t.Errorf("the rule does not trust %s", signer)
	}
	for name, change := range map[string]func(*CertSigner){
		"issuer":     func(s *CertSigner) { s.Issuer = "https://gitlab.com" },
		"subject":    func(s *CertSigner) { s.Subject = "https://github.com/evil/providers/x@refs/tags/v1" },
		"repository": func(s *CertSigner) { s.Repository = "acme/other" },
		"ref":        func(s *CertSigner) { s.Ref = "refs/heads/main" },
		"trigger":    func(s *CertSigner) { s.Trigger = "pull_request" },
	} {
		s := signer
		change(&s)
		if r.TrustsSigner(s) {
			t.Errorf("another %s is trusted: %s", name, s)
		}
	}

	for name, tc := range map[string]struct{ src, want string }{
		"identity without a root": {`trust "x" {
  repositories = ["**"]
  identity {
    issuer  = "https://i"
    subject = "s"
  }
}
`, "names no trusted root"},
		"no issuer": {`trusted_root = "trusted_root.json"
trust "x" {
  repositories = ["**"]
  identity { subject = "s" }
}
`, "needs an OIDC issuer"},
		"issuer twice": {`trusted_root = "trusted_root.json"
trust "x" {
  repositories = ["**"]
  identity {
    issuer        = "https://i"
    issuer_regexp = "i"
    subject       = "s"
  }
}
`, "exactly one of issuer or issuer_regexp"},
		"bad regexp": {`trusted_root = "trusted_root.json"
trust "x" {
  repositories = ["**"]
  identity {
    issuer         = "https://i"
    subject_regexp = "("
  }
}
`, "bad regular expression"},
		"neither keys nor identities": {`trust "x" {
  repositories = ["**"]
}
`, "lists no keys and no identity"},
		"a root that is not one": {`trusted_root = "good.hcl"
trust "x" {
  repositories = ["**"]
  keys = []
}
`, "trusted root"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadPolicy(write("p.hcl", tc.src), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}

	id := Identity{Issuer: "https://i", Subject: "s"}
	if _, err := NewPolicy(PolicyFrom{Identities: []Identity{id}}); !errors.Is(err, ErrNoTrustedRoot) {
		t.Errorf("identities without a root: %v", err)
	}
	if _, err := NewPolicy(PolicyFrom{Identities: []Identity{id}, TrustedRoot: root, File: good}); !errors.Is(err, ErrKeysAndPolicy) {
		t.Errorf("identities and a policy file: %v", err)
	}
	p, err = NewPolicy(PolicyFrom{Identities: []Identity{id}, TrustedRoot: root, Rule: "--certificate-identity"})
	if err != nil || len(p.Rules) != 1 || p.Rules[0].TrustedRoot == nil || len(p.Rules[0].Identities) != 1 || p.Match("any/repo", "") == nil {
		t.Fatalf("flags' identity: %+v, %v", p, err)
	}
	// --trusted-root serves a policy file whose rules name none.
	noroot := write("noroot.hcl", `trust "x" {
  repositories = ["**"]
  identity {
    issuer  = "https://i"
    subject = "s"
  }
}
`)
	if p, err := NewPolicy(PolicyFrom{File: noroot, TrustedRoot: root}); err != nil || p.Rules[0].TrustedRoot == nil {
		t.Errorf("policy with --trusted-root: %v", err)
	}
	if _, err := NewPolicy(PolicyFrom{Identities: []Identity{{Subject: "s"}}, TrustedRoot: root}); err == nil || !strings.Contains(err.Error(), "OIDC issuer") {
		t.Errorf("a flag identity without issuer: %v", err)
	}
}

// TestKeylessTimes: with sigstore-go's virtual Sigstore (a Fulcio CA, a TSA and a Rekor in
// process), a signature whose transparency-log time lies inside the certificate's validity is
// accepted, one whose log time lies after it is refused as used outside its validity, and the
// identity rule still decides.
func TestKeylessTimes(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	// Its CA issues no SCTs: a root listing its CT logs refuses every certificate, which the
	// last case checks; the others use the root without them.
	tr := &TrustedRoot{Path: "virtual-root", root: noCTLogs{vs}}
	subject := digest.FromString("index")
	st, err := subjectStatement(ocispec.Descriptor{Digest: subject})
	if err != nil {
		t.Fatal(err)
	}
	const who, issuer = "https://github.com/acme/providers/.github/workflows/release.yml@refs/tags/v1.0.0", "https://token.actions.githubusercontent.com"
	ids := []Identity{{Issuer: issuer, Subject: who}}
	attest := func(at time.Time) *keyless {
		t.Helper()
		e, err := vs.AttestAtTime(who, issuer, st, at, false)
		if err != nil {
			t.Fatal(err)
		}
		vc, err := e.VerificationContent()
		if err != nil {
			t.Fatal(err)
		}
		return &keyless{entity: e, leaf: vc.Certificate()}
	}

	signer, err := attest(time.Now().Add(time.Minute)).check(tr, ids, subject)
	if err != nil || signer.Subject != who || signer.Issuer != issuer {
		t.Fatalf("in its validity: %v, %+v", err, signer)
	}
	if _, err := attest(time.Now().Add(time.Minute)).check(tr, ids, digest.FromString("another")); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("another subject: %v", err)
	}
	if _, err := attest(time.Now().Add(time.Hour)).check(tr, ids, subject); err == nil || !strings.Contains(err.Error(), "outside its validity") {
		t.Errorf("logged an hour later: %v, want a refusal for use outside the validity", err)
	}
	other := []Identity{{Issuer: issuer, SubjectRegexp: "^https://github.com/acme/other/"}}
	if _, err := attest(time.Now().Add(time.Minute)).check(tr, other, subject); err == nil || !strings.Contains(err.Error(), "keyless signature by "+who) {
		t.Errorf("another identity: %v", err)
	}
	if _, err := attest(time.Now().Add(time.Minute)).check(nil, ids, subject); err == nil || !strings.Contains(err.Error(), "no trusted root") {
		t.Errorf("no root: %v", err)
	}
	withCT := &TrustedRoot{Path: "virtual-root", root: vs}
	if _, err := attest(time.Now().Add(time.Minute)).check(withCT, ids, subject); err == nil || !strings.Contains(err.Error(), "SCT does not check") {
		t.Errorf("a root with CT logs, a certificate without SCT: %v", err)
	}
}

// noCTLogs is trusted material without its CT logs.
type noCTLogs struct{ root.TrustedMaterial }

func (noCTLogs) CTLogs() map[string]*root.TransparencyLog { return nil }

// TestKeylessSimpleSigningAnnotations: cosign's keyless annotations on a simple-signing layer
// (certificate, RFC 3161 timestamp, Rekor bundle) become a bundle sigstore-go checks: the
// Rekor entry's signed entry timestamp proves the time without a TSA; without either, there is
// no trusted time; a payload changed after signing does not verify.
func TestKeylessSimpleSigningAnnotations(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	tr := &TrustedRoot{Path: "virtual-root", root: noCTLogs{vs}}
	subject := digest.FromString("index")
	payload := []byte(`{"critical":{"identity":{"docker-reference":"r.example/acme/hello"},"image":{"docker-manifest-digest":"` + subject.String() + `"},"type":"cosign container image signature"},"optional":null}`)
	const who, issuer = "https://github.com/acme/providers/.github/workflows/release.yml@refs/tags/v1.0.0", "https://token.actions.githubusercontent.com"
	ids := []Identity{{Issuer: issuer, Subject: who}}
	e, err := vs.Sign(who, issuer, payload)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := e.SignatureContent()
	sig := sc.MessageSignatureContent().Signature()
	vc, _ := e.VerificationContent()
	certPEM, _ := cryptoutils.MarshalCertificateToPEM(vc.Certificate())
	ts, _ := e.Timestamps()
	tsJSON, _ := json.Marshal(map[string][]byte{"SignedRFC3161Timestamp": ts[0]})
	entries, _ := e.TlogEntries()
	// The entry's signed entry timestamp is the log's signature over this payload, which is also
	// what cosign stores beside it.
	tle := entries[0].TransparencyLogEntry()
	rp := tlog.RekorPayload{Body: base64.StdEncoding.EncodeToString(tle.GetCanonicalizedBody()), IntegratedTime: tle.GetIntegratedTime(),
		LogIndex: tle.GetLogIndex(), LogID: hex.EncodeToString(tle.GetLogId().GetKeyId())}
	set, err := vs.RekorSignPayload(rp)
	if err != nil {
		t.Fatal(err)
	}
	rekorJSON, _ := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": rp})
	check := func(payload []byte, ts, rekor string) error {
		t.Helper()
		k, err := newKeylessSimpleSigning(payload, sig, string(certPEM), ts, rekor)
		if err != nil {
			return err
		}
		_, err = k.check(tr, ids, subject)
		return err
	}
	if err := check(payload, string(tsJSON), ""); err != nil {
		t.Errorf("with the TSA's timestamp: %v", err)
	}
	if err := check(payload, "", string(rekorJSON)); err != nil {
		t.Errorf("with the Rekor bundle: %v", err)
	}
	set[len(set)/2] ^= 1
	forged, _ := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": rp})
	if err := check(payload, "", string(forged)); err == nil || !strings.Contains(err.Error(), "transparency-log entry does not check") {
		t.Errorf("with a forged signed entry timestamp: %v", err)
	}
	if err := check(payload, "", ""); err == nil || !strings.Contains(err.Error(), "no trusted time") {
		t.Errorf("with neither: %v", err)
	}
	changed := bytes.Replace(payload, []byte("acme"), []byte("evil"), 1)
	if err := check(changed, string(tsJSON), ""); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a changed payload: %v", err)
	}
	if _, err := newKeylessSimpleSigning(payload, sig, string(certPEM), "", `{"Payload":{}}`); err == nil || !strings.Contains(err.Error(), "Rekor bundle annotation") {
		t.Errorf("a malformed Rekor bundle: %v", err)
	}
}
