package modulepkg

import (
	"context"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
)

// Fetched is a module package read from a target, every digest and size checked.
type Fetched struct {
	Manifest    ocispec.Descriptor
	Zip         []byte
	Annotations map[string]string
}

// Fetch resolves ref (a tag or digest) in src, fetches the manifest and checks that it is a module
// package (an image manifest, not an index; artifactType modulepkg; exactly one archive/zip layer),
// then fetches the zip, refusing one over maxBytes before any byte of it is read and checking its
// digest and size.
func Fetch(ctx context.Context, src oras.ReadOnlyTarget, ref string, maxBytes int64) (*Fetched, error) {
	r, err := Resolve(ctx, src, ref)
	if err != nil {
		return nil, err
	}
	zipData, err := r.FetchZip(ctx, src, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return &Fetched{Manifest: r.Manifest, Zip: zipData, Annotations: r.Parsed.Annotations}, nil
}
