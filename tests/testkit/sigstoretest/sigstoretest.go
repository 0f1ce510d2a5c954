// Package sigstoretest makes what sigstore clients write, for tests that verify it.
package sigstoretest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
)

// TrustedRoot is the trusted_root.json of the virtual Sigstore vs (its CA, TSA and Rekor log),
// as a Sigstore instance publishes it in TUF.
func TrustedRoot(t testing.TB, vs *ca.VirtualSigstore) []byte {
	t.Helper()
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), vs.RekorLogs())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TimestampedBlobBundle signs data as who (of issuer) with the virtual Sigstore and gives the
// bundle 'cosign sign-blob --new-bundle-format' would write: the certificate, an RFC 3161
// timestamp and the message signature.
func TimestampedBlobBundle(t testing.TB, vs *ca.VirtualSigstore, who, issuer string, data []byte) []byte {
	t.Helper()
	e, err := vs.Sign(who, issuer, data)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := e.SignatureContent()
	ms := sc.MessageSignatureContent()
	vc, _ := e.VerificationContent()
	ts, _ := e.Timestamps()
	return []byte(fmt.Sprintf(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json",
"verificationMaterial":{"certificate":{"rawBytes":%q},"timestampVerificationData":{"rfc3161Timestamps":[{"signedTimestamp":%q}]}},
"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":%q},"signature":%q}}`,
		base64.StdEncoding.EncodeToString(vc.Certificate().Raw), base64.StdEncoding.EncodeToString(ts[0]),
		base64.StdEncoding.EncodeToString(ms.Digest()), base64.StdEncoding.EncodeToString(ms.Signature())))
}
