// Package iox holds the small io helpers several packages share: a reader that ends when its
// context does, and a writer that counts.
package iox

import (
	"context"
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

// CountingWriter counts the bytes written through it.
type CountingWriter struct {
	W io.Writer
	N int64
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}
