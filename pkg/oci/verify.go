package oci

import (
	"context"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry/remote"
)

// BlobError is a blob that is not what its descriptor declared: more bytes, fewer, or other
// ones. It names the blob, what was declared and what arrived. It is content.ErrTrailingData,
// content.ErrMismatchedDigest or io.ErrUnexpectedEOF to errors.Is, as oras-go's own checks are.
type BlobError struct {
	Blob      ocispec.Descriptor
	From      string        // who sent it: "the registry", "the bundle"
	Got       int64         // bytes that arrived (Declared+1 when more did: reading stopped there)
	More      bool          // more than the declared size arrived
	Computed  digest.Digest // what the bytes hash to, when the size was right
	Truncated bool          // the stream ended before the declared size
}

func (e *BlobError) Error() string {
	what := fmt.Sprintf("blob %s", e.Blob.Digest)
	if e.Blob.MediaType != "" {
		what += " (" + e.Blob.MediaType + ")"
	}
	switch {
	case e.More:
		return fmt.Sprintf("%s: declared %d bytes, %s sent more than that (at least %d); refused at once", what, e.Blob.Size, e.From, e.Got)
	case e.Truncated:
		return fmt.Sprintf("%s: declared %d bytes, %s sent only %d before the stream ended", what, e.Blob.Size, e.From, e.Got)
	}
	return fmt.Sprintf("%s: declared digest %s, but the %d bytes %s sent hash to %s", what, e.Blob.Digest, e.Got, e.From, e.Computed)
}

// Unwrap gives the oras-go (or io) error of the same kind.
func (e *BlobError) Unwrap() error {
	switch {
	case e.More:
		return content.ErrTrailingData
	case e.Truncated:
		return io.ErrUnexpectedEOF
	}
	return content.ErrMismatchedDigest
}

// VerifyReader reads a blob's bytes and checks them against its descriptor on the way: it
// never gives more than the declared size, reads one byte past it to see that the sender
// stopped there, and ends with io.EOF only once the digest agrees; otherwise with a *BlobError.
type VerifyReader struct {
	r    io.Reader
	desc ocispec.Descriptor
	from string
	dg   digest.Digester
	n    int64
	err  error // set once the end was reached: nil means verified, or io.EOF after it
	done bool
	// sizeOnly skips the digest: for a reader whose bytes are hashed again on the way (by a
	// destination that checks them) or were just checked.
	sizeOnly bool
}

// NewSizeReader checks r against desc's size only (see VerifyReader.sizeOnly): no more and no
// fewer bytes than declared; the digest is left to whoever hashes them.
func NewSizeReader(r io.Reader, desc ocispec.Descriptor, from string) *VerifyReader {
	v := NewVerifyReader(r, desc, from)
	v.sizeOnly = true
	return v
}

// NewVerifyReader checks r against desc; from names the sender in errors ("the registry").
func NewVerifyReader(r io.Reader, desc ocispec.Descriptor, from string) *VerifyReader {
	alg := desc.Digest.Algorithm()
	if !alg.Available() {
		alg = digest.Canonical // Validate in Verify reports the unusable digest
	}
	return &VerifyReader{r: r, desc: desc, from: from, dg: alg.Digester()}
}

func (v *VerifyReader) Read(p []byte) (int, error) {
	if v.done {
		if v.err != nil {
			return 0, v.err
		}
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if rest := v.desc.Size - v.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	if len(p) == 0 {
		return 0, v.finish()
	}
	k, err := v.r.Read(p)
	v.n += int64(k)
	if !v.sizeOnly {
		v.dg.Hash().Write(p[:k])
	}
	switch {
	case err == io.EOF && v.n < v.desc.Size:
		v.done, v.err = true, &BlobError{Blob: v.desc, From: v.from, Got: v.n, Truncated: true}
		return k, v.err
	case err != nil && err != io.EOF:
		return k, err
	}
	return k, nil
}

// finish reads one byte past the declared size and checks the digest.
func (v *VerifyReader) finish() error {
	v.done = true
	var one [1]byte
	for {
		k, err := v.r.Read(one[:])
		if k > 0 {
			v.err = &BlobError{Blob: v.desc, From: v.from, Got: v.n + 1, More: true}
			return v.err
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			v.done = false
			return err
		}
	}
	if v.sizeOnly {
		return io.EOF
	}
	if err := v.desc.Digest.Validate(); err != nil {
		v.err = fmt.Errorf("blob %s: %w", v.desc.Digest, err)
		return v.err
	}
	if got := v.dg.Digest(); got != v.desc.Digest {
		v.err = &BlobError{Blob: v.desc, From: v.from, Got: v.n, Computed: got}
		return v.err
	}
	return io.EOF
}

// Verify reads what is left (nothing, for a caller that read to io.EOF) and says whether the
// blob was exactly what its descriptor declared.
func (v *VerifyReader) Verify() error {
	if _, err := io.Copy(io.Discard, v); err != nil {
		return err
	}
	return nil
}

// FetchAll fetches a small blob or manifest whole, checked against its descriptor (see
// VerifyReader); the size bound is the caller's, checked before the fetch.
func FetchAll(ctx context.Context, t interface {
	Fetch(context.Context, ocispec.Descriptor) (io.ReadCloser, error)
}, desc ocispec.Descriptor, from string) ([]byte, error) {
	rc, err := t.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, 0, max(0, min(desc.Size, 4<<20)))
	w := &sliceWriter{buf}
	if _, err := io.Copy(w, NewVerifyReader(rc, desc, from)); err != nil {
		return nil, err
	}
	return w.b, nil
}

type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// SenderOf names where a target's bytes come from, for errors: its registry, or a layout.
func SenderOf(t any) string {
	if s, ok := t.(interface{ Sender() string }); ok {
		return s.Sender()
	}
	switch r := t.(type) {
	case *remote.Repository:
		return "the registry " + r.Reference.Registry
	case *oci.Store, *oci.ReadOnlyStore:
		return "the layout"
	}
	return "the source"
}
