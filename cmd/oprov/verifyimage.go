package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// maxImageManifests bounds the manifests of an image index that verify fetches: a multi-platform
// image lists a few platforms (and maybe their attestations), far fewer than this.
const maxImageManifests = 256

// maxImageManifestBytes bounds the bytes of an index's manifests verify fetches, in all (each
// distinct digest once): a few platforms' manifests are kilobytes each.
const maxImageManifestBytes = 4 * manifest.MaxManifestSize

// dockerManifestList is Docker's media type of a multi-platform image's index (OCI's is
// ocispec.MediaTypeImageIndex).
const dockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"

// imageSubject is what a reference resolved to when it is neither a provider's index nor a module
// package: a container image (such as oprov's own serve image), an image index, or another artifact.
type imageSubject struct {
	Desc        ocispec.Descriptor
	Annotations map[string]string
	Manifests   []ocispec.Descriptor // an index's entries
}

// imageJSON is the image verify checked, in its JSON output.
type imageJSON struct {
	Reference string          `json:"reference"`
	Digest    string          `json:"digest"`
	MediaType string          `json:"media_type"`
	Manifests []imageManifest `json:"manifests,omitempty"`
}

type imageManifest struct {
	Platform string `json:"platform,omitempty"`
	Digest   string `json:"digest"`
}

// imageNote says what verify checked of an image, and what it did not.
const imageNote = "not an OpenTofu provider or module: only its signatures and manifests were checked"

// lookupImage fetches what ref names, once, and gives it when it is neither a provider's index nor
// a module package (those have their own, deeper checks); nil when it is one of them, or when it
// cannot be fetched (the provider check then says why).
func lookupImage(ctx context.Context, t oci.ReadOnly, ref oci.Ref) (*imageSubject, error) {
	if ref.Reference == "" {
		return nil, nil
	}
	desc, data, err := oras.FetchBytes(ctx, t, ref.Reference, oras.FetchBytesOptions{MaxBytes: manifest.MaxManifestSize})
	if err != nil {
		return nil, nil
	}
	var peek struct {
		ArtifactType string               `json:"artifactType"`
		Annotations  map[string]string    `json:"annotations"`
		Manifests    []ocispec.Descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(data, &peek); err != nil {
		return nil, fmt.Errorf("%s (%s): the manifest is not valid JSON: %w", ref, desc.Digest, err)
	}
	if peek.ArtifactType == manifest.ArtifactTypeProvider || peek.ArtifactType == manifest.ArtifactTypeModule {
		return nil, nil
	}
	img := &imageSubject{Desc: desc, Annotations: peek.Annotations}
	if desc.MediaType == ocispec.MediaTypeImageIndex || desc.MediaType == dockerManifestList {
		if len(peek.Manifests) > maxImageManifests {
			return nil, fmt.Errorf("%s (%s): the index lists %d manifests, over the limit of %d", ref, desc.Digest, len(peek.Manifests), maxImageManifests)
		}
		for i, m := range peek.Manifests {
			if err := m.Digest.Validate(); err != nil {
				return nil, fmt.Errorf("%s (%s): index entry %d: digest %q: %v", ref, desc.Digest, i, m.Digest, err)
			}
			if p := m.Platform; p != nil && !(platformWord(p.OS) && platformWord(p.Architecture) && (p.Variant == "" || platformWord(p.Variant))) {
				return nil, fmt.Errorf("%s (%s): index entry %d: platform %q/%q/%q is not an OS, architecture and variant name (letters, digits, '.', '_' and '-')", ref, desc.Digest, i, p.OS, p.Architecture, p.Variant)
			}
		}
		img.Manifests = peek.Manifests
	}
	return img, nil
}

// platformWord reports whether s can be an OS, architecture or variant name as images give them
// (linux, amd64, v8): verify prints them, so nothing else (no control character) is let through.
func platformWord(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// runVerifyImage verifies an image as cosign does: a signature by a trusted key or identity over
// exactly the digest ref resolved to. An index's manifests are then fetched and checked against
// their digests. Layers are not fetched: what they hold is not a provider's, so oprov has nothing
// to check in them.
func runVerifyImage(ctx context.Context, o *verifyOptions, t oci.ReadOnly, ref oci.Ref, img *imageSubject, policy *sign.Policy, opts sign.VerifyOptions) error {
	if len(o.Platforms) > 0 || o.AllZips || o.Address != "" {
		return usageErrorf("verify %s: this is not an OpenTofu provider or module (media type %q): it has no zips and no provider address: drop --platform, --all-platforms and --address", ref, img.Desc.MediaType)
	}
	d, err := sign.DecideManifest(ctx, t, ref, img.Desc, img.Annotations, policy, opts)
	if err != nil {
		return o.refused(oci.Explain("verify", ref, err))
	}
	if d.Warning != nil {
		fmt.Fprintf(o.io.ErrOut, "oprov: warning (policy mode warn): %v\n", d.Warning)
	}
	out := imageJSON{Reference: ref.String(), Digest: img.Desc.Digest.String(), MediaType: img.Desc.MediaType}
	manifests, err := checkImageManifests(ctx, t, ref, img)
	if err != nil {
		return o.refused(err)
	}
	out.Manifests = manifests
	if o.output.JSON() {
		res := struct {
			Verified   bool             `json:"verified"`
			Kind       string           `json:"kind"`
			Checked    string           `json:"checked"`
			Rule       string           `json:"rule,omitempty"`
			Mode       string           `json:"mode"`
			Warning    string           `json:"warning,omitempty"`
			Image      imageJSON        `json:"image"`
			Signatures []sign.Signature `json:"signatures,omitempty"`
		}{Verified: d.Warning == nil, Kind: "image", Checked: imageNote, Rule: d.Rule, Mode: d.Mode, Image: out}
		if d.Warning != nil {
			res.Warning = d.Warning.Error()
		}
		if d.Result != nil {
			res.Signatures = d.Result.Signatures
		}
		return writeJSON(o.io.Out, res)
	}
	if d.Result == nil {
		return nil
	}
	fmt.Fprintf(o.io.Out, "Verified image %s (%s)\n  %s\n", ref, out.Digest, imageNote)
	if d.Rule != "" {
		fmt.Fprintf(o.io.Out, "  trusted by rule %q of %s (mode %s)\n", d.Rule, o.Policy, d.Mode)
	}
	for _, s := range d.Result.Signatures {
		fmt.Fprintf(o.io.Out, "  signature %s (%s) by %s\n", s.Manifest, s.Form, s.By())
	}
	for _, m := range out.Manifests {
		fmt.Fprintf(o.io.Out, "  %-14s manifest %s checked\n", m.Platform, m.Digest)
	}
	return nil
}

// checkImageManifests fetches an index's manifests and checks each against the digest the signed
// index names. They are bounded before any fetch: each manifest's size, and all of them, each
// digest counted once.
func checkImageManifests(ctx context.Context, t oci.ReadOnly, ref oci.Ref, img *imageSubject) ([]imageManifest, error) {
	fetched := map[string]bool{}
	var total int64
	for _, m := range img.Manifests {
		if m.Size < 0 || m.Size > manifest.MaxManifestSize {
			return nil, fmt.Errorf("verify %s: manifest %s is %d bytes, over the %d byte limit", ref, m.Digest, m.Size, manifest.MaxManifestSize)
		}
		if !fetched[m.Digest.String()] {
			fetched[m.Digest.String()] = true
			total += m.Size
		}
	}
	if total > maxImageManifestBytes {
		return nil, fmt.Errorf("verify %s (%s): the index's manifests are %d bytes in all, over the limit of %d bytes: nothing was fetched", ref, img.Desc.Digest, total, maxImageManifestBytes)
	}
	clear(fetched)
	var manifests []imageManifest
	for _, m := range img.Manifests {
		if fetched[m.Digest.String()] {
			// Listed again (for another platform, or to make verify fetch it again): checked once.
		} else if _, err := content.FetchAll(ctx, t, m); errors.Is(err, content.ErrMismatchedDigest) || errors.Is(err, content.ErrTrailingData) {
			// FetchAll checks the size and the digest the signed index names.
			return nil, fmt.Errorf("verify %s (%s): manifest %s: the registry served bytes that do not match the digest the signed index names (%w): nothing was verified", ref, img.Desc.Digest, m.Digest, err)
		} else if err != nil {
			return nil, oci.Explain("verify", ref, fmt.Errorf("manifest %s: %w", m.Digest, err))
		}
		fetched[m.Digest.String()] = true
		im := imageManifest{Digest: m.Digest.String()}
		if p := m.Platform; p != nil {
			im.Platform = p.OS + "/" + p.Architecture
			if p.Variant != "" {
				im.Platform += "/" + p.Variant
			}
		}
		manifests = append(manifests, im)
	}
	return manifests, nil
}
