package bundle

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/internal/iox"
)

// readBack reads back what a tarLayout wrote: the file under its tar stream, once the buffer in
// between is flushed. pos counts the bytes handed to that buffer (the stream's position).
type readBack struct {
	flush func() error
	at    io.ReaderAt
	pos   *iox.CountingWriter
}

// streamBlob writes a blob whose digest is known before its bytes (a zip the signed SHA256SUMS
// names) into the tarball as fetch produces it: one pass, no file in between. fetch must fail
// unless the bytes it wrote hash to d (origin packages check themselves as they stream). check
// then reads the whole blob where it landed (a zip's central directory, its h1:); only when both
// pass is the blob present. A blob that fails halfway breaks the tarball: everything after
// fails, and the save removes it, so no bundle holds a blob nobody checked.
//
// A blob goes to a spill file under t.spill first when its size is unknown before the first
// byte (no Content-Length), when nothing can be read back, or when a delta's base holds it
// (checked, then left out). It gives the blob's size.
//
// With checks set, a blob written straight in is checked there, beside the next download (the
// hashes of one and the download of the next each take a core); the caller trusts nothing of it
// before checks.Wait passes.
func (t *tarLayout) streamBlob(d digest.Digest, fetch func(io.Writer) error, check func(io.ReaderAt, int64) error, checks *errgroup.Group) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken != nil {
		return 0, t.broken
	}
	s := &blobSink{t: t, d: d, direct: t.back != nil && !t.skip[d] && !t.have[d]}
	err := fetch(s)
	if s.spilled != nil {
		defer func() { s.spilled.Close(); os.Remove(s.spilled.Name()) }()
	}
	if s.header && err == nil && s.n != s.size {
		err = fmt.Errorf("%d bytes arrived, %d were announced", s.n, s.size)
	}
	if err != nil {
		if s.header {
			t.broken = fmt.Errorf("the tarball holds part of %s: %w", d, err)
		}
		return 0, err
	}
	if !s.header {
		return s.n, t.fromSpill(s, check)
	}
	if err := t.back.flush(); err != nil {
		t.broken = err
		return 0, err
	}
	t.have[d] = true // a failed check fails the save, which removes the tarball
	section := io.NewSectionReader(t.back.at, s.off, s.n)
	if checks != nil {
		checks.Go(func() error { return check(section, s.n) })
		return s.n, nil
	}
	return s.n, check(section, s.n)
}

// fromSpill checks a spilled blob and writes it into the tarball, unless the tarball has it or
// a delta's base does.
func (t *tarLayout) fromSpill(s *blobSink, check func(io.ReaderAt, int64) error) error {
	if s.spilled == nil { // an empty blob
		if err := s.spill(); err != nil {
			return err
		}
	}
	if err := check(s.spilled, s.n); err != nil {
		return err
	}
	if t.have[s.d] || t.skip[s.d] {
		return nil
	}
	if err := t.tw.WriteHeader(blobHeader(s.d, s.n)); err != nil {
		return err
	}
	if _, err := io.Copy(t.tw, io.NewSectionReader(s.spilled, 0, s.n)); err != nil {
		t.broken = fmt.Errorf("the tarball holds part of %s: %w", s.d, err)
		return err
	}
	t.have[s.d] = true
	return nil
}

func blobHeader(d digest.Digest, size int64) *tar.Header {
	return &tar.Header{Name: "blobs/" + d.Algorithm().String() + "/" + d.Encoded(), Typeflag: tar.TypeReg,
		Mode: 0o644, Size: size, Format: tar.FormatPAX}
}

// blobSink takes one streamed blob: straight into the tarball once its size is announced
// (ExpectSize, before the first byte), otherwise into a spill file.
type blobSink struct {
	t       *tarLayout
	d       digest.Digest
	direct  bool // it may go straight into the tarball
	header  bool // its tar header is written: its bytes go there
	size    int64
	off     int64 // where its bytes start in the file
	n       int64
	spilled *os.File
}

func (s *blobSink) ExpectSize(n int64) {
	if !s.direct || s.header || s.spilled != nil || s.n > 0 || n < 0 {
		return
	}
	if err := s.t.tw.WriteHeader(blobHeader(s.d, n)); err != nil {
		return // the bytes spill; the error comes again at the next header
	}
	s.header, s.size, s.off = true, n, s.t.back.pos.N
}

func (s *blobSink) Write(p []byte) (int, error) {
	if s.header {
		if s.n+int64(len(p)) > s.size {
			return 0, fmt.Errorf("more bytes than the %d announced", s.size)
		}
		n, err := s.t.tw.Write(p)
		s.n += int64(n)
		return n, err
	}
	if s.spilled == nil {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	n, err := s.spilled.Write(p)
	s.n += int64(n)
	return n, err
}

func (s *blobSink) spill() error {
	if s.t.spill == "" {
		return errors.New("no directory to hold a download whose size is unknown")
	}
	f, err := os.CreateTemp(s.t.spill, "blob-*")
	s.spilled = f
	return err
}

// untag forgets a tag (a version a delta's base already holds).
func (t *tarLayout) untag(ref string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.tags, ref)
	for i, r := range t.order {
		if r == ref {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
}

// Tags lists the tags given so far, after last, sorted (the tarball's own view of them).
func (t *tarLayout) Tags(_ context.Context, last string, fn func([]string) error) error {
	t.mu.Lock()
	refs := make([]string, 0, len(t.order))
	for _, r := range t.order {
		if r > last {
			refs = append(refs, r)
		}
	}
	t.mu.Unlock()
	sort.Strings(refs)
	return fn(refs)
}
