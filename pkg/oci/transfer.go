package oci

import (
	"bytes"
	"context"
	"errors"
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
)

// DefaultConcurrency is how many blobs move at once.
const DefaultConcurrency = 4

// Progress hears about long transfers. All methods may be called from several goroutines.
type Progress interface {
	// Plan adds bytes that are going to move.
	Plan(n int64)
	// Advance records bytes that moved.
	Advance(n int64)
}

// BytesOpener opens b for reading, as PushIfMissing wants.
func BytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// PushIfMissing uploads one piece of content unless the target has it already, and reports
// whether it uploaded. progress, when set, hears about the bytes.
func PushIfMissing(ctx context.Context, t Target, desc ocispec.Descriptor, open func() (io.ReadCloser, error), progress Progress) (bool, error) {
	ok, err := t.Exists(ctx, desc)
	if err != nil || ok {
		return false, err
	}
	rc, err := open()
	if err != nil {
		return false, err
	}
	defer rc.Close()
	var r io.Reader = rc
	if progress != nil {
		progress.Plan(desc.Size)
		r = &progressReader{r: rc, p: progress}
	}
	if err := t.Push(ctx, desc, r); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return false, err
	}
	return true, nil
}

// PushBytes stores a small piece of content unless the target has it already.
func PushBytes(ctx context.Context, t Target, desc ocispec.Descriptor, data []byte) error {
	_, err := PushIfMissing(ctx, t, desc, BytesOpener(data), nil)
	return err
}

// ProgressReader reports what is read through it to p.
func ProgressReader(r io.Reader, p Progress) io.Reader { return &progressReader{r: r, p: p} }

type progressReader struct {
	r io.Reader
	p Progress
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	if n > 0 {
		pr.p.Advance(int64(n))
	}
	return n, err
}
