package oci

import (
	"context"
	"errors"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/oprov/oprov/manifest"
)

// maxIndexManifestBytes bounds the bytes of an index's manifests that FetchIndexManifests
// fetches, in all (each distinct digest once): a few platforms' manifests are kilobytes each.
const maxIndexManifestBytes = 4 * manifest.MaxManifestSize

// FetchIndexManifests fetches the manifests a signed index (resolved from ref to index) lists,
// each checked against the digest the index names. They are bounded before any fetch: each
// manifest's size, and all of them, each digest counted once; a manifest listed again is fetched
// once. op names the operation in errors ("verify"), which name it and ref as Explain does.
func FetchIndexManifests(ctx context.Context, t ReadOnly, op string, ref Ref, index ocispec.Descriptor, entries []ocispec.Descriptor) error {
	fetched := map[string]bool{}
	var total int64
	for _, m := range entries {
		if m.Size < 0 || m.Size > manifest.MaxManifestSize {
			return stated(fmt.Errorf("%s %s: manifest %s is %d bytes, over the %d byte limit", op, ref, m.Digest, m.Size, manifest.MaxManifestSize))
		}
		if !fetched[m.Digest.String()] {
			fetched[m.Digest.String()] = true
			total += m.Size
		}
	}
	if total > maxIndexManifestBytes {
		return stated(fmt.Errorf("%s %s (%s): the index's manifests are %d bytes in all, over the limit of %d bytes: nothing was fetched", op, ref, index.Digest, total, maxIndexManifestBytes))
	}
	clear(fetched)
	for _, m := range entries {
		if fetched[m.Digest.String()] {
			continue // listed again (for another platform, or to make the client fetch it again): checked once
		}
		fetched[m.Digest.String()] = true
		// FetchAll checks the size and the digest the signed index names.
		_, err := content.FetchAll(ctx, t, m)
		if errors.Is(err, content.ErrMismatchedDigest) || errors.Is(err, content.ErrTrailingData) {
			return stated(fmt.Errorf("%s %s (%s): manifest %s: the registry served bytes that do not match the digest the signed index names (%w): nothing was verified", op, ref, index.Digest, m.Digest, err))
		}
		if err != nil {
			return stated(Explain(op, ref, fmt.Errorf("manifest %s: %w", m.Digest, err)))
		}
	}
	return nil
}

// statedError is an error that already names the operation and the reference: Explain passes it
// on as it is.
type statedError struct{ err error }

func stated(err error) error { return &statedError{err} }

func (e *statedError) Error() string  { return e.err.Error() }
func (e *statedError) Unwrap() error  { return e.err }
func (e *statedError) Complete() bool { return true }
