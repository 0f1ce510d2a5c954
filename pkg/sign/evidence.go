package sign

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
)

// Finding signature evidence is this file's job, and the only part of verification that does
// I/O: it reads every form of signature stored for a subject from a target (a registry, a
// layout, a bundle, or the cache's evidence) and parses it. verifyEvidence judges what it found.

// Evidence is the signature evidence found for one subject: every signature artifact, parsed,
// with the problems of those that could not be read.
type Evidence struct {
	Subject    ocispec.Descriptor
	candidates []candidate
}

// findEvidence gathers the signature evidence stored in t for subject.
func findEvidence(ctx context.Context, t oci.ReadOnly, subject ocispec.Descriptor) (*Evidence, error) {
	cands, err := findSignatures(ctx, t, subject)
	if err != nil {
		return nil, err
	}
	return &Evidence{Subject: subject, candidates: cands}, nil
}

// candidate is a signature found in the repository, not yet checked.
type candidate struct {
	form     Form
	manifest digest.Digest
	bundle   *signedBundle
	legacy   *legacySignature
	problem  string // set when the artifact could not be read
}

// findSignatures gathers every form of signature stored for subject (bundle and simple-signing
// referrers, and the .sig tag), looking for the tag and the referrers at the same time.
func findSignatures(ctx context.Context, t oci.ReadOnly, subject ocispec.Descriptor) ([]candidate, error) {
	var legacy []candidate
	done := make(chan struct{})
	go func() {
		defer close(done)
		legacy = findLegacy(ctx, t, subject)
	}()
	bundles, err := findBundles(ctx, t, subject)
	<-done
	if err != nil {
		return nil, err
	}
	return append(bundles, legacy...), nil
}

// findBundles reads the signatures among subject's referrers: cosign's bundles and its
// simple-signing referrers (what --registry-referrers-mode=oci-1-1 writes).
func findBundles(ctx context.Context, t oci.ReadOnly, subject ocispec.Descriptor) ([]candidate, error) {
	// Not filtered by artifact type: cosign's entry in the referrers-tag fallback index carries its
	// config's type, so each referrer's own manifest is read instead.
	refs, err := registry.Referrers(ctx, t, subject, "")
	if err != nil && !errors.Is(err, errdef.ErrNotFound) && !errors.Is(err, errdef.ErrUnsupported) {
		return nil, fmt.Errorf("listing referrers of %s: %w", subject.Digest, err)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Digest < refs[j].Digest })
	var out []candidate
	for _, r := range refs {
		if r.MediaType != ocispec.MediaTypeImageManifest {
			continue
		}
		m, _, err := fetchManifest(ctx, t, r)
		if err != nil {
			out = append(out, candidate{form: formBundle, manifest: r.Digest, problem: fmt.Sprintf("referrer %s: %v", short(r.Digest), err)})
			continue
		}
		if m.Subject == nil || m.Subject.Digest != subject.Digest {
			continue
		}
		if m.ArtifactType == cosignSigArtifactType || m.Config.MediaType == cosignSigArtifactType {
			out = append(out, simpleSigning(ctx, t, formReferrer, r.Digest, m, "referrer "+short(r.Digest))...)
			continue
		}
		if m.ArtifactType != bundleMediaType && m.Config.MediaType != bundleMediaType {
			continue // an SBOM or another attachment
		}
		for _, l := range m.Layers {
			if l.MediaType != bundleMediaType {
				continue
			}
			c := candidate{form: formBundle, manifest: r.Digest}
			data, err := fetchSmall(ctx, t, l)
			if err == nil {
				c.bundle, err = parseBundle(data)
			}
			if err != nil {
				c.problem = fmt.Sprintf("bundle %s: %v", short(r.Digest), err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// findLegacy reads the signatures under cosign v2's sha256-<hex>.sig tag.
func findLegacy(ctx context.Context, t oci.ReadOnly, subject ocispec.Descriptor) []candidate {
	tag := manifest.CosignSignatureTag(subject.Digest)
	desc, err := t.Resolve(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil
	}
	var m *ocispec.Manifest
	if err == nil {
		m, _, err = fetchManifest(ctx, t, desc)
	}
	if err != nil {
		return []candidate{{form: FormLegacy, problem: fmt.Sprintf("%s: %v", tag, err)}}
	}
	return simpleSigning(ctx, t, FormLegacy, desc.Digest, m, tag)
}

// simpleSigning reads the simple-signing layers of a cosign signature manifest (under the .sig
// tag, or a referrer), each a payload with its signature in an annotation. where names the
// manifest in problems.
func simpleSigning(ctx context.Context, t oci.ReadOnly, form Form, manifest digest.Digest, m *ocispec.Manifest, where string) []candidate {
	var out []candidate
	for _, l := range m.Layers {
		if l.MediaType != simpleSigningType {
			continue
		}
		c := candidate{form: form, manifest: manifest}
		sig, err := decodeSignatureAnnotation(l.Annotations[signatureAnnotation])
		var data []byte
		if err == nil {
			data, err = fetchSmall(ctx, t, l)
		}
		if err != nil {
			c.problem = fmt.Sprintf("%s layer %s: %v", where, short(l.Digest), err)
		} else {
			c.legacy = &legacySignature{layer: l, payload: data, signature: sig}
			if cert := l.Annotations[certificateAnnotation]; cert != "" {
				c.legacy.keyless, err = newKeylessSimpleSigning(data, sig, cert, l.Annotations[timestampAnnotation], l.Annotations[rekorBundleAnnotation])
				if err != nil {
					c.problem = fmt.Sprintf("%s layer %s: %v", where, short(l.Digest), err)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

func fetchSmall(ctx context.Context, t oci.ReadOnly, desc ocispec.Descriptor) ([]byte, error) {
	if desc.Size > maxSignatureManifest {
		return nil, fmt.Errorf("%s is %d bytes, over the limit", desc.Digest, desc.Size)
	}
	return content.FetchAll(ctx, t, desc)
}
