package sign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// Form names a signature's storage form.
type Form string

const (
	formBundle Form = "bundle"     // cosign's bundle format as an OCI 1.1 referrer
	FormLegacy Form = "legacy-tag" // cosign v2's sha256-<hex>.sig tag
	// formReferrer is cosign's simple-signing signature stored as an OCI 1.1 referrer
	// (cosign sign --registry-referrers-mode=oci-1-1); oprov reads it but does not write it.
	formReferrer Form = "simple-signing-referrer"
)

// SignOptions tunes Sign.
type SignOptions struct {
	// Legacy writes cosign v2's sha256-<hex>.sig tag instead of a bundle referrer.
	Legacy bool
	// Keyless signs with a short-lived Fulcio certificate for an OIDC identity instead of a key
	// (the Signer is then nil), as a bundle referrer.
	Keyless *Keyless
}

// SignResult tells what Sign stored.
type SignResult struct {
	Form      Form          `json:"form"`
	Subject   digest.Digest `json:"subject"`
	Signature digest.Digest `json:"signature_manifest"`
	Tag       string        `json:"tag,omitempty"`    // the .sig tag, for the legacy form
	Signer    *CertSigner   `json:"signer,omitempty"` // the identity a keyless signature is by
}

// Sign signs subject (a version's index) in repository ref and stores the signature in t. On a
// registry without the referrers API, oras-go keeps the OCI referrers tag up to date.
func Sign(ctx context.Context, t oci.Target, ref oci.Ref, subject ocispec.Descriptor, s *Signer, opts SignOptions) (*SignResult, error) {
	if opts.Keyless != nil {
		if opts.Legacy {
			return nil, errors.New("keyless signatures are written as bundles only: drop the legacy .sig form")
		}
		return signKeyless(ctx, t, subject, opts.Keyless)
	}
	if opts.Legacy {
		return signLegacy(ctx, t, ref, subject, s)
	}
	created, err := createdTime()
	if err != nil {
		return nil, err
	}
	art, err := newBundleArtifact(s, subject, created)
	if err != nil {
		return nil, err
	}
	if err := art.push(ctx, t); err != nil {
		return nil, err
	}
	return &SignResult{Form: formBundle, Subject: subject.Digest, Signature: art.manifest.desc.Digest}, nil
}

// push stores the bundle artifact: the empty config, the bundle, then the manifest.
func (art *bundleArtifact) push(ctx context.Context, t oci.Target) error {
	empty := blob{desc: ocispec.DescriptorEmptyJSON, data: ocispec.DescriptorEmptyJSON.Data}
	for _, b := range []blob{empty, art.layer, art.manifest} {
		if err := pushIfMissing(ctx, t, b); err != nil {
			return err
		}
	}
	return nil
}

func signLegacy(ctx context.Context, t oci.Target, ref oci.Ref, subject ocispec.Descriptor, s *Signer) (*SignResult, error) {
	layer, err := newLegacyLayer(s, dockerReference(ref), subject.Digest)
	if err != nil {
		return nil, err
	}
	tag := manifest.CosignSignatureTag(subject.Digest)
	// cosign keeps every signature of a digest as one layer of the same .sig manifest: add ours.
	var layers []ocispec.Descriptor
	if existing, err := fetchLegacyManifest(ctx, t, tag); err == nil {
		layers = existing.Layers
	} else if !errors.Is(err, errdef.ErrNotFound) {
		return nil, err
	}
	layers = append(layers, layer.desc)
	m, config, err := legacyManifest(layers)
	if err != nil {
		return nil, err
	}
	for _, b := range []blob{layer, config} {
		if err := pushIfMissing(ctx, t, b); err != nil {
			return nil, err
		}
	}
	if err := pushIfMissing(ctx, t, m); err != nil {
		return nil, err
	}
	if err := t.Tag(ctx, m.desc, tag); err != nil {
		return nil, err
	}
	return &SignResult{Form: FormLegacy, Subject: subject.Digest, Signature: m.desc.Digest, Tag: tag}, nil
}

// dockerReference is the identity cosign records in a simple-signing payload: the repository.
func dockerReference(ref oci.Ref) string {
	if ref.IsLayout() {
		return ref.Layout
	}
	return ref.Registry + "/" + ref.Repository
}

func pushIfMissing(ctx context.Context, t oci.Target, b blob) error {
	return oci.PushBytes(ctx, t, b.desc, b.data)
}

// maxSignatureManifest bounds what is read of signature artifacts.
const maxSignatureManifest = 4 << 20

func fetchLegacyManifest(ctx context.Context, t oci.ReadOnly, tag string) (*ocispec.Manifest, error) {
	desc, err := t.Resolve(ctx, tag)
	if err != nil {
		return nil, err
	}
	m, _, err := fetchManifest(ctx, t, desc)
	return m, err
}

func fetchManifest(ctx context.Context, t oci.ReadOnly, desc ocispec.Descriptor) (*ocispec.Manifest, []byte, error) {
	if desc.Size > maxSignatureManifest {
		return nil, nil, fmt.Errorf("manifest %s is %d bytes, over the limit", desc.Digest, desc.Size)
	}
	data, err := content.FetchAll(ctx, t, desc)
	if err != nil {
		return nil, nil, err
	}
	var m ocispec.Manifest
	if err := decodeJSON(data, &m); err != nil {
		return nil, nil, fmt.Errorf("manifest %s: %w", desc.Digest, err)
	}
	return &m, data, nil
}

// createdTime is SOURCE_DATE_EPOCH when set, otherwise now, in RFC 3339.
func createdTime() (string, error) {
	t, ok, err := providerrelease.SourceDateEpoch()
	if err != nil {
		return "", err
	}
	if !ok {
		t = time.Now().UTC()
	}
	return t.Format(time.RFC3339), nil
}
