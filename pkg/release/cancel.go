package release

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
)

// ContextReader reads from r until ctx is done, then fails with ctx's error: long copies and
// hashes end as soon as a command is interrupted. A nil ctx never ends.
func ContextReader(ctx context.Context, r io.Reader) io.Reader {
	if ctx == nil {
		return r
	}
	return &contextReader{ctx: ctx, r: r}
}

type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// HashZipH1Context is HashZipH1 that ends when ctx is done.
func HashZipH1Context(ctx context.Context, path string) (string, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return "", fmt.Errorf("h1 hash of %s: %w", path, err)
	}
	defer zr.Close()
	sums := map[string][]byte{}
	for _, f := range zr.File {
		if _, dup := sums[f.Name]; dup {
			return "", fmt.Errorf("h1 hash of %s: zip entry %q appears twice", path, f.Name)
		}
		sums[f.Name] = nil
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return "", fmt.Errorf("h1 hash of %s: %w", path, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, ContextReader(ctx, rc))
		rc.Close()
		if err != nil {
			return "", fmt.Errorf("h1 hash of %s: %w", path, err)
		}
		sums[f.Name] = h.Sum(nil)
	}
	return hash1(sums)
}
