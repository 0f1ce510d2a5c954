package sign

import (
	"strings"
	"testing"
	"unicode"

	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	"github.com/oprov/oprov/tests/testkit/sigstoretest"
)

// TestKeylessSignerPrintedQuoted: a certificate that chains to the trusted root, issued for an
// identity holding terminal escapes (an OIDC issuer claim, a subject), reaches messages quoted:
// in a refusal for another identity and in the signer an acceptance shows. Otherwise a signer
// could clear the user's screen or draw a false verdict.
func TestKeylessSignerPrintedQuoted(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	tr := &TrustedRoot{Path: "virtual-root", root: noCTLogs{vs}}
	const who, issuer = "dev\x1b[2J@example.com", "https://issuer.example\x1b[1A\rVerified OK\u202e"
	data := []byte("checksums\n")
	file := writeTestFile(t, t.TempDir(), "SHA256SUMS", data)
	bundle := sigstoretest.TimestampedBlobBundle(t, vs, who, issuer, data)
	clean := func(what, s string) {
		t.Helper()
		for _, r := range s {
			if !unicode.IsPrint(r) && r != '\n' {
				t.Errorf("%s holds %U unquoted: %q", what, r, s)
				return
			}
		}
	}

	_, err = VerifyBlob(file, "b", bundle, BlobOptions{Identities: []Identity{{IssuerRegexp: "^https://", Subject: "other@example.com"}}, TrustedRoot: tr})
	wantRefused(t, "another identity", err, "not a trusted identity")
	if err != nil {
		clean("the refusal", err.Error())
	}

	res, err := VerifyBlob(file, "b", bundle, BlobOptions{Identities: []Identity{{IssuerRegexp: "^https://", SubjectRegexp: "@example[.]com$"}}, TrustedRoot: tr})
	if err != nil {
		t.Fatal(err)
	}
	clean("the signer shown", res.Signer.String())
	if res.Signer.Issuer != issuer || res.Signer.Subject != who {
		t.Errorf("the signer's fields (as JSON gives them) changed: %+v", res.Signer)
	}
	if !strings.Contains(res.Signer.String(), `\x1b[2J`) {
		t.Errorf("the signer shown does not say what the escape was: %s", res.Signer)
	}
}

// TestKeylessRefusalNamesTheClaim: a certificate refused by an identity that differs from it in
// one claim says which: a repository the certificate does not carry, another subject. Without it
// the signer and the trusted identity read alike ("ci@example.com (issuer X)" beside "subject
// ci@example.com, issuer X, repository acme/hello").
func TestKeylessRefusalNamesTheClaim(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	tr := &TrustedRoot{Path: "virtual-root", root: noCTLogs{vs}}
	const who, issuer = "ci@example.com", "https://issuer.example.com"
	data := []byte("checksums\n")
	file := writeTestFile(t, t.TempDir(), "SHA256SUMS", data)
	bundle := sigstoretest.TimestampedBlobBundle(t, vs, who, issuer, data)
	for _, tc := range []struct {
		id   Identity
		want string
	}{
		{Identity{Subject: who, Issuer: issuer, Repository: "acme/hello"}, "not a trusted identity: the certificate has no repository claim, which the identity requires (acme/hello) (trusted: subject ci@example.com"},
		{Identity{Subject: "release@example.com", Issuer: issuer}, "the certificate has subject ci@example.com, not release@example.com"},
		{Identity{SubjectRegexp: "^release@", Issuer: issuer}, "the certificate has subject ci@example.com, which does not match ^release@"},
		{Identity{Subject: who, Issuer: "https://other.example.com"}, "the certificate has issuer https://issuer.example.com, not https://other.example.com"},
	} {
		_, err := VerifyBlob(file, "b", bundle, BlobOptions{Identities: []Identity{tc.id}, TrustedRoot: tr})
		wantRefused(t, tc.id.String(), err, tc.want)
	}
}
