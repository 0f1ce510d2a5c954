package sign

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/tests/testkit/sigstoretest"
)

// blobBundleJSON is the bundle cosign sign-blob --new-bundle-format writes with a key: a message
// signature over the digest, the key named by a hint.
func blobBundleJSON(digest, sig []byte, hint string) []byte {
	h, _ := json.Marshal(hint)
	return []byte(fmt.Sprintf(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":%s}},"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":%q},"signature":%q}}`,
		h, base64.StdEncoding.EncodeToString(digest), base64.StdEncoding.EncodeToString(sig)))
}

// signBlob signs data with s as cosign sign-blob does and returns the bundle.
func signBlob(t *testing.T, s *Signer, data []byte, hint string) []byte {
	t.Helper()
	sig, err := s.SignMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return blobBundleJSON(sum[:], sig, hint)
}

func writeTestFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantRefused checks that err is a refusal (not a failure to read) whose reason says want.
func wantRefused(t *testing.T, what string, err error, want string) {
	t.Helper()
	var be *BlobError
	if !errors.As(err, &be) {
		t.Errorf("%s: %v, want a refusal", what, err)
		return
	}
	if !strings.Contains(be.Reason, want) {
		t.Errorf("%s: %q does not say %q", what, be.Reason, want)
	}
	if be.Unsigned {
		t.Errorf("%s: refused as unsigned: %v", what, err)
	}
}

// TestVerifyBlobWithKeys: a key bundle as cosign sign-blob writes it verifies with its key among
// others; a changed file, a bundle over another file (as is, or claiming this file's digest), and
// another key are refused; the bundle's key hint does not matter, only the given keys count.
func TestVerifyBlobWithKeys(t *testing.T) {
	dir := t.TempDir()
	s, pub := testKeys(t, "good")
	other, otherPub := testKeys(t, "other")
	data := []byte("oprov_1.0.0_linux_amd64.tar.gz  abc\n")
	file := writeTestFile(t, dir, "SHA256SUMS", data)
	bundle := signBlob(t, s, data, s.Public.Hint)

	res, err := VerifyBlob(file, "SHA256SUMS.bundle", bundle, BlobOptions{Keys: []PublicKey{otherPub, pub}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if res.Key != pub.Name || res.KeyHint != pub.Hint || res.Digest.Encoded() != fmt.Sprintf("%x", sum) || res.File != file {
		t.Errorf("result: %+v", res)
	}

	changed := writeTestFile(t, dir, "changed", append(data, '\n'))
	_, err = VerifyBlob(changed, "b", bundle, BlobOptions{Keys: []PublicKey{pub}})
	wantRefused(t, "a changed file", err, "the file was changed, or the bundle is another file's")

	// A signature over another file, its bundle edited to claim this file's digest.
	otherSig, _ := s.SignMessage(bytes.NewReader([]byte("another file")))
	_, err = VerifyBlob(file, "b", blobBundleJSON(sum[:], otherSig, s.Public.Hint), BlobOptions{Keys: []PublicKey{pub}})
	wantRefused(t, "a signature over another file claiming this file's digest", err, "not by a trusted key (trusted: "+pub.Name)

	_, err = VerifyBlob(file, "b", bundle, BlobOptions{Keys: []PublicKey{otherPub}})
	wantRefused(t, "another key", err, "not by a trusted key (trusted: "+otherPub.Name+"); the bundle names its key by the hint "+pub.Hint)

	// The hint is the bundle's claim, not a key: a hint naming the trusted key does not make
	// another key's signature good, and a hint naming another key does not spoil a good one.
	_, err = VerifyBlob(file, "b", signBlob(t, other, data, pub.Hint), BlobOptions{Keys: []PublicKey{pub}})
	wantRefused(t, "another key's signature, hinting at the trusted key", err, "not by a trusted key")
	for _, hint := range []string{otherPub.Hint, "", "not base64"} {
		if _, err := VerifyBlob(file, "b", signBlob(t, s, data, hint), BlobOptions{Keys: []PublicKey{pub}}); err != nil {
			t.Errorf("hint %q: %v", hint, err)
		}
	}

	_, err = VerifyBlob(file, "b", bundle, BlobOptions{Identities: []Identity{{Issuer: "https://i", Subject: "s"}}})
	wantRefused(t, "a key bundle, identities only", err, "give the signer's public key with --key")

	// What the bundle says reaches the terminal quoted: no control sequence gets through.
	_, err = VerifyBlob(file, "b", signBlob(t, s, data, "\x1b]0;pwned\x07\x1b[2J"), BlobOptions{Identities: []Identity{{Issuer: "https://i", Subject: "s"}}})
	wantRefused(t, "a hint with control characters", err, `hint "\x1b]0;pwned\a\x1b[2J"`)
	if err != nil && strings.ContainsAny(err.Error(), "\x1b\x07") {
		t.Errorf("the refusal carries the bundle's control characters: %q", err)
	}
}

// TestVerifyBlobRefusesOtherBundles: what is not a message-signature bundle is refused saying
// what it is and what was expected; a bundle with no signature is refused as unsigned.
func TestVerifyBlobRefusesOtherBundles(t *testing.T) {
	dir := t.TempDir()
	_, pub := testKeys(t, "good")
	file := writeTestFile(t, dir, "f", []byte("x"))
	opts := BlobOptions{Keys: []PublicKey{pub}}
	for name, tc := range map[string]struct{ bundle, want string }{
		"old format":   {`{"base64Signature":"MEUC","cert":"","rekorBundle":null}`, "cosign's old format"},
		"not JSON":     {`-----BEGIN PUBLIC KEY-----`, "not JSON"},
		"no media":     {`{"messageSignature":{}}`, "not a sigstore bundle"},
		"other media":  {`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`, "not a sigstore bundle's"},
		"attestation":  {`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}},"dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"MEUC"}]}}`, "an attestation"},
		"sha3":         {`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}},"messageSignature":{"messageDigest":{"algorithm":"SHA3_256","digest":"AA=="},"signature":"MEUC"}}`, "only SHA-256, SHA-384 and SHA-512"},
		"short digest": {`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}},"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":"AA=="},"signature":"MEUC"}}`, "message digest is 1 bytes, not 32"},
		"no material":  {`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},"signature":"MEUC"}}`, "neither a key nor a certificate"},
	} {
		_, err := VerifyBlob(file, "b", []byte(tc.bundle), opts)
		wantRefused(t, name, err, tc.want)
		if err != nil && name != "sha3" && name != "short digest" && !strings.Contains(err.Error(), "cosign sign-blob --new-bundle-format") {
			t.Errorf("%s: %v does not say what was expected", name, err)
		}
	}
	for name, b := range map[string]string{
		"empty signature": `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}},"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":"AA=="}}}`,
		"no content":      `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}}}`,
	} {
		var be *BlobError
		if _, err := VerifyBlob(file, "b", []byte(b), opts); !errors.As(err, &be) || !be.Unsigned || !strings.Contains(be.Reason, "not signed") {
			t.Errorf("%s: %v, want a refusal as unsigned", name, err)
		}
	}
}

// TestVerifyBlobBoundsAndStreams: the bundle file is read up to a bound (a larger bundle is
// refused, not read whole); the file is hashed as a stream; a file
// that cannot be read is an error of its own, not a refusal.
func TestVerifyBlobBoundsAndStreams(t *testing.T) {
	dir := t.TempDir()
	big := writeTestFile(t, dir, "big.bundle", nil)
	if err := os.Truncate(big, 64<<20); err != nil {
		t.Fatal(err)
	}
	// Measured rather than read from /dev/zero: a reader without its bound would take all memory.
	var be *BlobError
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadBlobBundle(big)
	runtime.ReadMemStats(&after)
	if !errors.As(err, &be) || !strings.Contains(be.Reason, "larger than any cosign writes") {
		t.Errorf("a 64 MiB bundle: %v, want a refusal for its size", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("refusing a 64 MiB bundle allocated %d MiB: it was read whole before its size was checked", alloc>>20)
	}
	if _, err := ReadBlobBundle(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing bundle: %v", err)
	}

	// A 256 MiB file (sparse) is hashed with far less memory than its size.
	s, pub := testKeys(t, "good")
	file := writeTestFile(t, dir, "large", nil)
	if err := os.Truncate(file, 256<<20); err != nil {
		t.Fatal(err)
	}
	sig, err := s.SignMessage(bytes.NewReader(make([]byte, 256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(make([]byte, 256<<20))
	bundle := blobBundleJSON(sum[:], sig, "")
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := VerifyBlob(file, "b", bundle, BlobOptions{Keys: []PublicKey{pub}}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("verifying a 256 MiB file allocated %d MiB: it was read whole, not streamed", alloc>>20)
	}

	if _, err := VerifyBlob(filepath.Join(dir, "missing"), "b", bundle, BlobOptions{Keys: []PublicKey{pub}}); !errors.Is(err, fs.ErrNotExist) || errors.As(err, &be) {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := VerifyBlob(dir, "b", bundle, BlobOptions{Keys: []PublicKey{pub}}); err == nil || errors.As(err, &be) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
}

// TestVerifyBlobKeyless: a message signature by a Fulcio certificate with an RFC 3161 timestamp
// (sigstore-go's virtual Sigstore) verifies under the trusted identity, through the same check as
// keyless image signatures; another identity, a certificate of another CA, a changed file, and
// a keyless bundle given only keys are refused.
func TestVerifyBlobKeyless(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	tr := &TrustedRoot{Path: "virtual-root", root: noCTLogs{vs}}
	const who, issuer = "https://github.com/oprov/oprov/.github/workflows/release.yml@refs/tags/v1.0.0", "https://token.actions.githubusercontent.com"
	ids := []Identity{{Issuer: issuer, Subject: who}}
	dir := t.TempDir()
	data := []byte("checksums\n")
	file := writeTestFile(t, dir, "SHA256SUMS", data)
	bundle := sigstoretest.TimestampedBlobBundle(t, vs, who, issuer, data)

	res, err := VerifyBlob(file, "b", bundle, BlobOptions{Identities: ids, TrustedRoot: tr})
	if err != nil {
		t.Fatal(err)
	}
	if res.Signer == nil || res.Signer.Subject != who || len(res.Time) == 0 || !strings.Contains(res.Time[0], "timestamp authority") {
		t.Errorf("result: %+v", res)
	}

	_, err = VerifyBlob(file, "b", bundle, BlobOptions{Identities: []Identity{{Issuer: issuer, SubjectRegexp: "^https://github.com/evil/"}}, TrustedRoot: tr})
	wantRefused(t, "another identity", err, "keyless signature by "+who)

	vs2, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	anotherCA := otherFulcio{noCTLogs{vs}, vs2.FulcioCertificateAuthorities()}
	_, err = VerifyBlob(file, "b", bundle, BlobOptions{Identities: ids, TrustedRoot: &TrustedRoot{Path: "another-root", root: anotherCA}})
	wantRefused(t, "a certificate of another CA", err, "does not chain to a certificate authority of another-root")

	changed := writeTestFile(t, dir, "changed", []byte("checksums, changed\n"))
	_, err = VerifyBlob(changed, "b", bundle, BlobOptions{Identities: ids, TrustedRoot: tr})
	wantRefused(t, "a changed file", err, "the file was changed")

	_, pub := testKeys(t, "good")
	_, err = VerifyBlob(file, "b", bundle, BlobOptions{Keys: []PublicKey{pub}})
	wantRefused(t, "a keyless bundle, keys only", err, "signed keylessly by "+who)
}

// otherFulcio is trusted material whose Fulcio CAs are another Sigstore's (its TSA still proves the time).
type otherFulcio struct {
	root.TrustedMaterial
	cas []root.CertificateAuthority
}

func (o otherFulcio) FulcioCertificateAuthorities() []root.CertificateAuthority { return o.cas }

// TestVerifyBlobKeylessRekorTime: a keyless blob bundle whose only proof of time is a Rekor v1
// entry's integrated time (cosign v2 keyless against the public instance: no TSA) verifies, its
// time proven by the log; the entry with its signed entry timestamp broken is refused.
func TestVerifyBlobKeylessRekorTime(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	tr := &TrustedRoot{Path: "virtual-root", root: noCTLogs{vs}}
	const who, issuer = "https://github.com/oprov/oprov/.github/workflows/release.yml@refs/tags/v1.0.0", "https://token.actions.githubusercontent.com"
	ids := []Identity{{Issuer: issuer, Subject: who}}
	data := []byte("checksums\n")
	file := writeTestFile(t, t.TempDir(), "SHA256SUMS", data)
	e, err := vs.Sign(who, issuer, data)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := e.SignatureContent()
	ms := sc.MessageSignatureContent()
	vc, _ := e.VerificationContent()
	entries, _ := e.TlogEntries()
	bundle := func(tle *protorekor.TransparencyLogEntry) []byte {
		t.Helper()
		pb := &protobundle.Bundle{
			MediaType: bundleV01MediaType,
			VerificationMaterial: &protobundle.VerificationMaterial{
				Content: &protobundle.VerificationMaterial_X509CertificateChain{X509CertificateChain: &protocommon.X509CertificateChain{
					Certificates: []*protocommon.X509Certificate{{RawBytes: vc.Certificate().Raw}}}},
				TlogEntries: []*protorekor.TransparencyLogEntry{tle},
			},
			Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
				MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: ms.Digest()},
				Signature:     ms.Signature(),
			}},
		}
		out, err := protojson.Marshal(pb)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The entry with its signed entry timestamp, as cosign's Rekor bundle annotation carries it.
	raw := entries[0].TransparencyLogEntry()
	rp := tlog.RekorPayload{Body: base64.StdEncoding.EncodeToString(raw.GetCanonicalizedBody()), IntegratedTime: raw.GetIntegratedTime(),
		LogIndex: raw.GetLogIndex(), LogID: hex.EncodeToString(raw.GetLogId().GetKeyId())}
	set, err := vs.RekorSignPayload(rp)
	if err != nil {
		t.Fatal(err)
	}
	rekorJSON, _ := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": rp})
	tle, err := parseRekorAnnotation(string(rekorJSON))
	if err != nil {
		t.Fatal(err)
	}
	res, err := VerifyBlob(file, "b", bundle(tle), BlobOptions{Identities: ids, TrustedRoot: tr})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Time) != 1 || !strings.HasPrefix(res.Time[0], "transparency log ") || !res.Logged {
		t.Errorf("result: %+v, want the time proven by the log", res)
	}
	broken := proto.Clone(tle).(*protorekor.TransparencyLogEntry)
	bad := broken.GetInclusionPromise().GetSignedEntryTimestamp()
	bad[len(bad)/2] ^= 1
	_, err = VerifyBlob(file, "b", bundle(broken), BlobOptions{Identities: ids, TrustedRoot: tr})
	wantRefused(t, "a broken signed entry timestamp", err, "transparency-log entry does not check")
}
