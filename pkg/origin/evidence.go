package origin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"

	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// ErrNoEvidence says a version carries no origin SHA256SUMS evidence (no referrer of
// ArtifactTypeChecksums).
var ErrNoEvidence = errors.New("no origin SHA256SUMS evidence is attached")

// Bounds on the evidence's parts, as mirror fetches them from an origin.
const (
	maxEvidenceManifest = 64 << 10
	maxSums             = 1 << 20
	maxSignature        = 64 << 10
	maxKeys             = 1 << 20
)

// EvidenceResult is what checked origin evidence proves: which key signed SHA256SUMS, and that
// it lists every zip of the version by the digest the version's index reaches.
type EvidenceResult struct {
	Referrer    digest.Digest // the evidence's manifest
	Fingerprint string        // the signing key's primary fingerprint (40 hex digits)
	KeyID       string
	Zips        int
	// Sums and Signature are the SHA256SUMS and detached signature checked, as the origin
	// served them; SignerKey is the key that made the signature, ASCII-armored (public part
	// only): what a registry passes on for clients to check the origin's signature themselves.
	Sums, Signature []byte
	SignerKey       string
}

// VerifyEvidence checks a version's origin evidence (the referrer mirror and 'save --config'
// attach: SHA256SUMS, its detached OpenPGP signature, the keys the origin served) against the
// trusted fingerprints: SHA256SUMS must be signed by a key of the evidence whose primary
// fingerprint is trusted, and must list, under its release file name
// (terraform-provider-TYPE_VERSION_OS_ARCH.zip, the type and version of the version checked),
// the digest of every platform's zip. The key travels with the evidence; only the fingerprint
// makes it trusted. Every part is read bounded and checked against its digest.
func VerifyEvidence(ctx context.Context, t oci.ReadOnly, v *artifact.Version, trusted []string) (*EvidenceResult, error) {
	refs, err := registry.Referrers(ctx, t, v.Index, ArtifactTypeChecksums)
	if err != nil && !errors.Is(err, errdef.ErrNotFound) && !errors.Is(err, errdef.ErrUnsupported) {
		return nil, err
	}
	if len(refs) == 0 {
		return nil, ErrNoEvidence
	}
	var errs []string
	for _, r := range refs {
		res, err := checkEvidence(ctx, t, v, r, trusted)
		if err == nil {
			return res, nil
		}
		errs = append(errs, fmt.Sprintf("evidence %s: %v", r.Digest, err))
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

func checkEvidence(ctx context.Context, t oci.ReadOnly, v *artifact.Version, ref ocispec.Descriptor, trusted []string) (*EvidenceResult, error) {
	parts, err := evidenceParts(ctx, t, v, ref)
	if err != nil {
		return nil, err
	}
	keys, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(parts[mediaTypeKeys]))
	if err != nil {
		return nil, fmt.Errorf("the signing keys it carries are not OpenPGP keys: %w", err)
	}
	var ring openpgp.EntityList
	var names []string
	for _, e := range keys {
		fp := fingerprint(e)
		names = append(names, fp)
		if slices.Contains(trusted, fp) {
			ring = append(ring, e)
		}
	}
	if len(ring) == 0 {
		return nil, fmt.Errorf("it carries the key(s) %s, none of which the trust rule names in origin_keys (add the fingerprint of the key you trust to sign these providers)", strings.Join(names, ", "))
	}
	signer, err := openpgp.CheckDetachedSignature(ring, bytes.NewReader(parts[mediaTypeSums]), bytes.NewReader(parts[mediaTypeSignature]), nil)
	if err != nil {
		return nil, fmt.Errorf("the SHA256SUMS signature does not verify with the trusted key(s) %s: %v", strings.Join(fingerprints(ring), ", "), err)
	}
	sums, err := providerrelease.ParseSums(bytes.NewReader(parts[mediaTypeSums]))
	if err != nil {
		return nil, fmt.Errorf("SHA256SUMS: %w", err)
	}
	n, err := checkZipsListed(ctx, t, v, sums)
	if err != nil {
		return nil, err
	}
	var armored bytes.Buffer
	w, err := armor.Encode(&armored, openpgp.PublicKeyType, nil)
	if err == nil {
		err = signer.Serialize(w)
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("the signing key: %w", err)
	}
	return &EvidenceResult{Referrer: ref.Digest, Fingerprint: fingerprint(signer), KeyID: fmt.Sprintf("%016X", signer.PrimaryKey.KeyId), Zips: n,
		Sums: parts[mediaTypeSums], Signature: parts[mediaTypeSignature], SignerKey: armored.String() + "\n"}, nil
}

// evidenceParts reads the evidence manifest (which must refer to the version's index) and its
// three files, by media type, each bounded and checked against its digest.
func evidenceParts(ctx context.Context, t oci.ReadOnly, v *artifact.Version, ref ocispec.Descriptor) (map[string][]byte, error) {
	if ref.Size > maxEvidenceManifest {
		return nil, fmt.Errorf("its manifest declares %d bytes, over %d", ref.Size, maxEvidenceManifest)
	}
	data, err := oci.FetchAll(ctx, t, ref, oci.SenderOf(t))
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("its manifest: %w", err)
	}
	if m.Subject == nil || m.Subject.Digest != v.Index.Digest {
		return nil, fmt.Errorf("it does not refer to the version's index %s", v.Index.Digest)
	}
	limits := map[string]int64{mediaTypeSums: maxSums, mediaTypeSignature: maxSignature, mediaTypeKeys: maxKeys}
	parts := map[string][]byte{}
	for _, l := range m.Layers {
		limit, ok := limits[l.MediaType]
		if !ok || parts[l.MediaType] != nil {
			continue
		}
		if l.Size > limit {
			return nil, fmt.Errorf("its %s declares %d bytes, over %d", l.MediaType, l.Size, limit)
		}
		if parts[l.MediaType], err = oci.FetchAll(ctx, t, l, oci.SenderOf(t)); err != nil {
			return nil, err
		}
	}
	for mt := range limits {
		if parts[mt] == nil {
			return nil, fmt.Errorf("it holds no %s", mt)
		}
	}
	return parts, nil
}

// checkZipsListed checks that signed SHA256SUMS lists every platform zip of the version under
// its release file name, with the zip's digest.
func checkZipsListed(ctx context.Context, t oci.ReadOnly, v *artifact.Version, sums providerrelease.Sums) (int, error) {
	if v.Version == "" || v.Type == "" {
		return 0, fmt.Errorf("the version or provider type of %s is unknown, so SHA256SUMS cannot be matched to its zips", v.Index.Digest)
	}
	platforms, err := artifact.FetchPlatforms(ctx, t, v)
	if err != nil {
		return 0, err
	}
	for _, p := range platforms {
		name := providerrelease.Filename{Type: v.Type, Version: v.Version, Platform: p.Platform}.String()
		want, ok := sums[name]
		if !ok {
			return 0, fmt.Errorf("the signed SHA256SUMS does not list %s (the %s zip of %s %s)", name, p.Platform, v.Type, v.Version)
		}
		if p.Zip.Digest.Algorithm() != digest.SHA256 || !strings.EqualFold(want, p.Zip.Digest.Encoded()) {
			return 0, fmt.Errorf("the signed SHA256SUMS says %s is sha256:%s, but the version's %s zip is %s", name, want, p.Platform, p.Zip.Digest)
		}
	}
	return len(platforms), nil
}

// fingerprint is an entity's primary key fingerprint, as origin_keys names it.
func fingerprint(e *openpgp.Entity) string { return fmt.Sprintf("%X", e.PrimaryKey.Fingerprint) }

func fingerprints(el openpgp.EntityList) []string {
	out := make([]string, len(el))
	for i, e := range el {
		out[i] = fingerprint(e)
	}
	return out
}
