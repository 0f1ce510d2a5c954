package sign

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/sigstore/cosign/v2/pkg/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
)

// Media types and annotations of cosign's signature forms (format.md §5 and §7).
const (
	bundleMediaType     = "application/vnd.dev.sigstore.bundle.v0.3+json"
	inTotoPayloadType   = "application/vnd.in-toto+json"
	inTotoStatementType = "https://in-toto.io/Statement/v1"
	cosignSignPredicate = "https://sigstore.dev/cosign/sign/v1"
	simpleSigningType   = types.SimpleSigningMediaType
	signatureAnnotation = "dev.cosignproject.cosign/signature"
	// Keyless simple-signing layers carry the Fulcio certificate, its chain, and the RFC 3161
	// timestamp (and the Rekor bundle) in these annotations.
	certificateAnnotation = "dev.sigstore.cosign/certificate"
	chainAnnotation       = "dev.sigstore.cosign/chain"
	timestampAnnotation   = "dev.sigstore.cosign/rfc3161timestamp"
	rekorBundleAnnotation = "dev.sigstore.cosign/bundle"
	// cosignSigArtifactType marks cosign's simple-signing signature stored as a referrer.
	cosignSigArtifactType = "application/vnd.dev.cosign.artifact.sig.v1+json"
	bundleContentAnnot    = "dev.sigstore.bundle.content"
	bundlePredicateAnnot  = "dev.sigstore.bundle.predicateType"
	legacyConfigMediaType = ocispec.MediaTypeImageConfig
)

// blob is content with its descriptor.
type blob struct {
	desc ocispec.Descriptor
	data []byte
}

func newBlob(mediaType string, data []byte) blob {
	return blob{desc: ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}, data: data}
}

func jsonBlob(mediaType string, v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, err
	}
	return newBlob(mediaType, data), nil
}

// statement is the in-toto statement cosign's bundle format signs.
type statement struct {
	Type          string             `json:"_type"`
	Subject       []statementSubject `json:"subject"`
	PredicateType string             `json:"predicateType"`
	Predicate     json.RawMessage    `json:"predicate,omitempty"`
}

type statementSubject struct {
	Name   string            `json:"name,omitempty"`
	Digest map[string]string `json:"digest"`
}

// bundleArtifact is a signature in the bundle form: the manifest (a referrer of subject) and its
// bundle layer.
type bundleArtifact struct {
	manifest blob
	layer    blob
}

// newBundleArtifact signs subject's digest as cosign sign --new-bundle-format does: a DSSE
// envelope over an in-toto statement, in a sigstore bundle, in an OCI manifest whose subject is
// the signed manifest. created is the RFC 3339 time recorded on the manifest.
func newBundleArtifact(s *Signer, subject ocispec.Descriptor, created string) (*bundleArtifact, error) {
	st, err := subjectStatement(subject)
	if err != nil {
		return nil, err
	}
	sig, err := s.SignMessage(bytes.NewReader(dsse.PAE(inTotoPayloadType, st)))
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	b := &protobundle.Bundle{
		MediaType: bundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{Hint: s.Public.Hint}},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: st, PayloadType: inTotoPayloadType, Signatures: []*protodsse.Signature{{Sig: sig}},
		}},
	}
	data, err := protojson.Marshal(b)
	if err != nil {
		return nil, err
	}
	return bundleManifest(data, subject, created)
}

// subjectStatement is the in-toto statement cosign signs for an image: subject's digest, with
// cosign's signing predicate.
func subjectStatement(subject ocispec.Descriptor) ([]byte, error) {
	return json.Marshal(statement{
		Type:          inTotoStatementType,
		Subject:       []statementSubject{{Digest: map[string]string{subject.Digest.Algorithm().String(): subject.Digest.Encoded()}}},
		PredicateType: cosignSignPredicate,
	})
}

// bundleManifest wraps a bundle (JSON) in the OCI manifest cosign stores it in: a referrer of
// subject with the bundle as its one layer.
func bundleManifest(data []byte, subject ocispec.Descriptor, created string) (*bundleArtifact, error) {
	layer := newBlob(bundleMediaType, data)
	annotations := map[string]string{bundleContentAnnot: "dsse-envelope", bundlePredicateAnnot: cosignSignPredicate}
	if created != "" {
		annotations[ocispec.AnnotationCreated] = created
	}
	m, err := jsonBlob(ocispec.MediaTypeImageManifest, ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: bundleMediaType,
		Config:       ocispec.DescriptorEmptyJSON,
		Layers:       []ocispec.Descriptor{layer.desc},
		Subject:      &ocispec.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations:  annotations,
	})
	if err != nil {
		return nil, err
	}
	m.desc.ArtifactType = bundleMediaType
	return &bundleArtifact{manifest: m, layer: layer}, nil
}

// signedBundle is what a bundle says once parsed: the statement and its signatures.
type signedBundle struct {
	payloadType string
	payload     []byte
	sigs        [][]byte
	hint        string
	keyless     *keyless // set when a certificate, not a key, signed it
}

func parseBundle(data []byte) (*signedBundle, error) {
	var b protobundle.Bundle
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("not a sigstore bundle: %w", err)
	}
	env := b.GetDsseEnvelope()
	if env == nil {
		return nil, fmt.Errorf("the bundle holds no DSSE envelope (a message-signature bundle does not sign an image)")
	}
	out := &signedBundle{payloadType: env.GetPayloadType(), payload: env.GetPayload()}
	if pk := b.GetVerificationMaterial().GetPublicKey(); pk != nil {
		out.hint = pk.GetHint()
	} else if vm := b.GetVerificationMaterial(); vm.GetCertificate() != nil || vm.GetX509CertificateChain() != nil {
		k, err := newKeylessBundle(&b)
		if err != nil {
			return nil, err
		}
		out.keyless = k
	}
	for _, s := range env.GetSignatures() {
		out.sigs = append(out.sigs, s.GetSig())
	}
	if len(out.sigs) == 0 {
		return nil, fmt.Errorf("the bundle's envelope has no signatures")
	}
	return out, nil
}

// signedDigests checks a bundle's signatures with key and returns the digests its statement
// names as subjects. It fails unless some signature verifies.
func (sb *signedBundle) verify(key PublicKey) ([]digest.Digest, error) {
	if sb.payloadType != inTotoPayloadType {
		return nil, fmt.Errorf("the envelope's payload type is %q, not %q", sb.payloadType, inTotoPayloadType)
	}
	pae := dsse.PAE(sb.payloadType, sb.payload)
	var ok bool
	for _, sig := range sb.sigs {
		if key.verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(pae)) == nil {
			ok = true
			break
		}
	}
	if !ok {
		return nil, errNotThisKey
	}
	return sb.subjects()
}

// subjects checks that the bundle's statement is a cosign signature and returns the digests it
// names as subjects.
func (sb *signedBundle) subjects() ([]digest.Digest, error) {
	if sb.payloadType != inTotoPayloadType {
		return nil, fmt.Errorf("the envelope's payload type is %q, not %q", sb.payloadType, inTotoPayloadType)
	}
	var st statement
	if err := json.Unmarshal(sb.payload, &st); err != nil {
		return nil, fmt.Errorf("the signed statement is not valid JSON: %w", err)
	}
	if st.Type != inTotoStatementType && st.Type != "https://in-toto.io/Statement/v0.1" {
		return nil, fmt.Errorf("the signed payload is not an in-toto statement (type %q)", st.Type)
	}
	if st.PredicateType != cosignSignPredicate {
		return nil, fmt.Errorf("the signed statement's predicate is %q, not a cosign signature (%s)", st.PredicateType, cosignSignPredicate)
	}
	var ds []digest.Digest
	for _, s := range st.Subject {
		for alg, hex := range s.Digest {
			d := digest.NewDigestFromEncoded(digest.Algorithm(alg), hex)
			if d.Validate() == nil {
				ds = append(ds, d)
			}
		}
	}
	return ds, nil
}

// legacySignature is one layer of a cosign v2 .sig manifest.
type legacySignature struct {
	layer     ocispec.Descriptor
	payload   []byte
	signature []byte
	keyless   *keyless // set when the layer carries cosign's certificate annotation
}

// newLegacyLayer signs a simple-signing payload naming subject's digest, as cosign sign does by
// default. dockerRef is the repository, recorded as the claimed identity.
func newLegacyLayer(s *Signer, dockerRef string, subject digest.Digest) (blob, error) {
	p := payload.SimpleContainerImage{
		Critical: payload.Critical{
			Identity: payload.Identity{DockerReference: dockerRef},
			Image:    payload.Image{DockerManifestDigest: subject.String()},
			Type:     payload.CosignSignatureType,
		},
	}
	data, err := json.Marshal(p)
	if err != nil {
		return blob{}, err
	}
	sig, err := s.SignMessage(bytes.NewReader(data))
	if err != nil {
		return blob{}, fmt.Errorf("signing: %w", err)
	}
	b := newBlob(simpleSigningType, data)
	b.desc.Annotations = map[string]string{signatureAnnotation: base64.StdEncoding.EncodeToString(sig)}
	return b, nil
}

// legacyManifest builds the .sig manifest that holds the given signature layers, with the same
// config cosign writes.
func legacyManifest(layers []ocispec.Descriptor) (manifest, config blob, err error) {
	diffIDs := make([]string, len(layers))
	for i, l := range layers {
		diffIDs[i] = l.Digest.String()
	}
	config, err = jsonBlob(legacyConfigMediaType, map[string]any{
		"architecture": "", "os": "", "created": "0001-01-01T00:00:00Z",
		"history": []map[string]string{{"created": "0001-01-01T00:00:00Z"}},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": diffIDs},
		"config":  map[string]any{},
	})
	if err != nil {
		return blob{}, blob{}, err
	}
	manifest, err = jsonBlob(ocispec.MediaTypeImageManifest, ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    config.desc,
		Layers:    layers,
	})
	return manifest, config, err
}

// verify checks a legacy signature with key and returns the digest its payload names.
func (ls *legacySignature) verify(key PublicKey) (digest.Digest, error) {
	if key.verifier.VerifySignature(bytes.NewReader(ls.signature), bytes.NewReader(ls.payload)) != nil {
		return "", errNotThisKey
	}
	return ls.subject()
}

// subject reads the digest the simple-signing payload names.
func (ls *legacySignature) subject() (digest.Digest, error) {
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(ls.payload, &p); err != nil {
		return "", fmt.Errorf("the signed payload is not valid JSON: %w", err)
	}
	if p.Critical.Type != payload.CosignSignatureType {
		return "", fmt.Errorf("the signed payload's type is %q, not %q", p.Critical.Type, payload.CosignSignatureType)
	}
	d, err := digest.Parse(p.Critical.Image.DockerManifestDigest)
	if err != nil {
		return "", fmt.Errorf("the signed payload names no valid digest: %w", err)
	}
	return d, nil
}

func decodeSignatureAnnotation(s string) ([]byte, error) {
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("signature annotation is not base64: %w", err)
	}
	return sig, nil
}
