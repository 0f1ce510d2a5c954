package sign

import (
	"bytes"
	"crypto"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/opencontainers/go-digest"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"google.golang.org/protobuf/encoding/protojson"
)

// A blob is any file (a release's SHA256SUMS, an archive) signed as `cosign sign-blob
// --new-bundle-format --bundle FILE.bundle` signs it: a sigstore bundle holding a message
// signature over the file's SHA-256 digest, by a key (the bundle names it only by a hint) or by a
// Fulcio certificate with an RFC 3161 timestamp or a transparency-log entry. The file is hashed
// as a stream; the bundle is read whole, bounded. A key signature is checked with the trusted
// keys alone (the hint is ignored); a certificate's through sigstore-go against the trusted root,
// as keyless image signatures are (keyless.check).

// maxBlobBundle bounds the bundle file: cosign's are a few kilobytes, a certificate chain and a
// log entry included.
const maxBlobBundle = maxSignatureManifest

// BlobOptions say whom a blob's signature is trusted from: keys, or keyless identities checked
// against a trusted root.
type BlobOptions struct {
	Keys        []PublicKey
	Identities  []Identity
	TrustedRoot *TrustedRoot
}

// BlobResult is an accepted blob signature: the file's digest and who signed it.
type BlobResult struct {
	File    string        `json:"file"`
	Bundle  string        `json:"bundle"`
	Digest  digest.Digest `json:"digest"`
	Key     string        `json:"key,omitempty"`
	KeyHint string        `json:"key_hint,omitempty"`
	Signer  *CertSigner   `json:"signer,omitempty"`
	Time    []string      `json:"time_proven_by,omitempty"`
	// Logged is true when a transparency-log entry of the signature checked against the root.
	Logged bool `json:"transparency_log_checked,omitempty"`
}

// BlobError is a refused blob: the bundle is not a signature of this file by a trusted signer.
type BlobError struct {
	File   string
	Reason string
	// Unsigned is true when the bundle holds no signature at all.
	Unsigned bool
}

func (e *BlobError) Error() string {
	if e.File == "" {
		return "verify-blob: " + e.Reason
	}
	return fmt.Sprintf("verify-blob %s: %s", e.File, e.Reason)
}

// blobBundle is what a message-signature bundle says once parsed.
type blobBundle struct {
	alg     crypto.Hash
	claimed digest.Digest // the digest the bundle says it signs: a hint, checked against the file's
	sig     []byte
	hint    string   // the key hint of a key-signed bundle
	keyless *keyless // set when a certificate signed it
}

// The digest algorithms a message signature may name, as sigstore's protobuf spells them.
var blobAlgorithms = map[protocommon.HashAlgorithm]struct {
	hash crypto.Hash
	alg  digest.Algorithm
}{
	protocommon.HashAlgorithm_SHA2_256: {crypto.SHA256, digest.SHA256},
	protocommon.HashAlgorithm_SHA2_384: {crypto.SHA384, digest.SHA384},
	protocommon.HashAlgorithm_SHA2_512: {crypto.SHA512, digest.SHA512},
}

// expectedBundle says what verify-blob reads, for refusals of other files.
const expectedBundle = "expected a sigstore bundle with a message signature, as 'cosign sign-blob --new-bundle-format --bundle FILE.bundle' writes"

// parseBlobBundle reads a sigstore bundle that signs a blob. Its errors say what the file is
// instead and what was expected.
func parseBlobBundle(data []byte) (*blobBundle, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("the bundle is not JSON (%v): %s", err, expectedBundle)
	}
	if _, ok := top["mediaType"]; !ok {
		if _, old := top["base64Signature"]; old {
			return nil, fmt.Errorf("the bundle is in cosign's old format (base64Signature, cert, rekorBundle): %s; sign again with --new-bundle-format, or check this one with cosign verify-blob", expectedBundle)
		}
		return nil, fmt.Errorf("the file names no mediaType, so it is not a sigstore bundle: %s", expectedBundle)
	}
	var pb protobundle.Bundle
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &pb); err != nil {
		return nil, fmt.Errorf("not a sigstore bundle (%v): %s", err, expectedBundle)
	}
	if !strings.HasPrefix(pb.GetMediaType(), "application/vnd.dev.sigstore.bundle") {
		return nil, fmt.Errorf("the file's mediaType is %q, not a sigstore bundle's: %s", pb.GetMediaType(), expectedBundle)
	}
	if pb.GetDsseEnvelope() != nil {
		return nil, fmt.Errorf("the bundle holds a signed statement (an attestation, or an image signature), not a signature over a file's bytes: %s", expectedBundle)
	}
	ms := pb.GetMessageSignature()
	if ms == nil {
		return nil, errUnsignedBlob
	}
	if len(ms.GetSignature()) == 0 {
		return nil, errUnsignedBlob
	}
	alg, ok := blobAlgorithms[ms.GetMessageDigest().GetAlgorithm()]
	if !ok {
		return nil, fmt.Errorf("the bundle's message digest uses %s: only SHA-256, SHA-384 and SHA-512 are read", ms.GetMessageDigest().GetAlgorithm())
	}
	if n := len(ms.GetMessageDigest().GetDigest()); n != alg.hash.Size() {
		return nil, fmt.Errorf("the bundle's %s message digest is %d bytes, not %d", ms.GetMessageDigest().GetAlgorithm(), n, alg.hash.Size())
	}
	out := &blobBundle{
		alg:     alg.hash,
		claimed: digest.NewDigestFromBytes(alg.alg, ms.GetMessageDigest().GetDigest()),
		sig:     ms.GetSignature(),
	}
	vm := pb.GetVerificationMaterial()
	switch {
	case vm.GetPublicKey() != nil:
		out.hint = vm.GetPublicKey().GetHint()
	case vm.GetCertificate() != nil || vm.GetX509CertificateChain() != nil:
		k, err := newKeylessBundle(&pb)
		if err != nil {
			return nil, err
		}
		out.keyless = k
	default:
		return nil, fmt.Errorf("the bundle names neither a key nor a certificate: %s", expectedBundle)
	}
	return out, nil
}

// errUnsignedBlob is a bundle that holds no signature.
var errUnsignedBlob = errors.New("not signed: the bundle holds no signature")

// ReadBlobBundle reads a bundle file, bounded: a bundle larger than any cosign writes, or a
// device that never ends, is refused before it is parsed.
func ReadBlobBundle(path string) ([]byte, error) {
	f, err := openRegular(path, "bundle "+path)
	if errors.Is(err, fs.ErrInvalid) {
		return nil, err // it names the bundle
	} else if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBlobBundle+1))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	if len(data) > maxBlobBundle {
		return nil, &BlobError{Reason: fmt.Sprintf("bundle %s is over %d bytes, larger than any cosign writes: %s", path, maxBlobBundle, expectedBundle)}
	}
	return data, nil
}

// isDirError is a directory given where a file is expected: a bad argument (fs.ErrInvalid).
type isDirError string

func (e isDirError) Error() string        { return string(e) + " is a directory, not a file" }
func (e isDirError) Is(target error) bool { return target == fs.ErrInvalid }

// notRegularError is a FIFO, a device or a socket given where a file is expected: a bad argument.
type notRegularError struct {
	name string
	mode fs.FileMode
}

func (e notRegularError) Error() string {
	kind := "a special file"
	switch {
	case e.mode&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case e.mode&fs.ModeDevice != 0:
		kind = "a device"
	case e.mode&fs.ModeSocket != 0:
		kind = "a socket"
	}
	return fmt.Sprintf("%s is %s, not a regular file: save what it gives to a file and name that", e.name, kind)
}
func (e notRegularError) Is(target error) bool { return target == fs.ErrInvalid }

// openRegular opens path for reading and gives it only when it is a regular file, judged on the
// open descriptor (after any symlink), so that what is judged is what is read. The open does not
// block: a FIFO with no writer is refused at once rather than waited on, and a device such as
// /dev/zero is refused rather than read without end. name says what path is in messages.
func openRegular(path, name string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case st.IsDir():
		f.Close()
		return nil, isDirError(name)
	case !st.Mode().IsRegular():
		f.Close()
		return nil, notRegularError{name, st.Mode()}
	}
	return f, nil
}

// VerifyBlob checks that bundle (the bytes of a bundle file, named bundlePath in messages) is a
// signature of the file at path by a trusted key or identity. The file is read as a stream, once.
// A refusal is a *BlobError; a file that cannot be read gives its os error.
func VerifyBlob(path, bundlePath string, bundle []byte, opts BlobOptions) (*BlobResult, error) {
	refuse := func(err error) error {
		return &BlobError{File: path, Reason: err.Error(), Unsigned: errors.Is(err, errUnsignedBlob)}
	}
	if len(opts.Keys) == 0 && len(opts.Identities) == 0 {
		return nil, refuse(errors.New(noTrust))
	}
	// Opened first, so that a missing file is reported as such whatever the bundle holds.
	f, err := openRegular(path, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := parseBlobBundle(bundle)
	if err != nil {
		return nil, refuse(fmt.Errorf("bundle %s: %w", bundlePath, err))
	}
	sum, err := hashFile(f, path, b.claimed.Algorithm())
	if err != nil {
		return nil, err
	}
	res, err := b.check(sum, opts)
	if err != nil {
		return nil, refuse(err)
	}
	res.File, res.Bundle = path, bundlePath
	return res, nil
}

// hashFile hashes the open file f (path names it), as a stream.
func hashFile(f *os.File, path string, alg digest.Algorithm) (digest.Digest, error) {
	d := alg.Digester()
	if _, err := io.Copy(d.Hash(), f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return d.Digest(), nil
}

// check judges the bundle against the file's digest sum: the digest it names must be sum, and
// its signature over sum must be by a trusted key or, for a certificate, check against the
// trusted root and name a trusted identity.
func (b *blobBundle) check(sum digest.Digest, opts BlobOptions) (*BlobResult, error) {
	if b.claimed != sum {
		return nil, fmt.Errorf("the bundle signs a file whose digest is %s, and this file's is %s: the file was changed, or the bundle is another file's", b.claimed, sum)
	}
	raw, err := hexDigest(sum)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, k := range opts.Keys {
		err := verifyDigest(k, b.sig, raw, b.alg)
		if err == nil {
			return &BlobResult{Digest: sum, Key: k.Name, KeyHint: k.Hint}, nil
		}
		if !errors.Is(err, errNotThisKey) {
			problems = append(problems, err.Error())
		}
	}
	if b.keyless != nil {
		if len(opts.Identities) == 0 {
			// Who the certificate names, unchecked: shown so the user can decide whom to trust.
			who := "a certificate"
			if s, err := signerOf(b.keyless.leaf); err == nil {
				who = printable(s.String())
			}
			return nil, fmt.Errorf("signed keylessly by %s, not by a trusted key (to trust a keyless signer, give --certificate-identity, --certificate-oidc-issuer and --trusted-root)", who)
		}
		who, err := b.keyless.check(opts.TrustedRoot, opts.Identities, sum)
		if err != nil {
			return nil, err
		}
		return &BlobResult{Digest: sum, Signer: who, Time: b.keyless.times, Logged: b.keyless.logged}, nil
	}
	if len(opts.Keys) == 0 {
		return nil, fmt.Errorf("signed with a key (hint %s), not by a certificate: give the signer's public key with --key", printable(b.hint))
	}
	var names []string
	for _, k := range opts.Keys {
		names = append(names, k.Name)
	}
	why := ""
	if len(problems) > 0 {
		why = " (" + strings.Join(problems, "; ") + ")"
	}
	named := ""
	if b.hint != "" {
		named = fmt.Sprintf("; the bundle names its key by the hint %s (base64 of the SHA-256 of the public key): give that key with --key if you trust it", printable(b.hint))
	}
	return nil, fmt.Errorf("the signature is not by a trusted key (trusted: %s)%s%s", strings.Join(names, ", "), why, named)
}

// verifyDigest checks a signature over a digest with key. errNotThisKey means another key made it.
func verifyDigest(k PublicKey, sig, sum []byte, alg crypto.Hash) error {
	if _, ok := k.verifier.(*signature.ED25519Verifier); ok {
		return fmt.Errorf("key %s is an Ed25519 key, which signs a file's bytes rather than its digest: verify-blob checks ECDSA and RSA keys", k.Name)
	}
	err := k.verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(nil), options.WithDigest(sum), options.WithCryptoSignerOpts(alg))
	if err != nil {
		return errNotThisKey
	}
	return nil
}

func hexDigest(d digest.Digest) ([]byte, error) {
	raw, err := hex.DecodeString(d.Encoded())
	if err != nil {
		return nil, fmt.Errorf("digest %s: %w", d, err)
	}
	return raw, nil
}

// printable is s as it may reach a terminal: itself when every character is printable, else
// quoted, so that a bundle cannot send control sequences to the user's terminal.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
