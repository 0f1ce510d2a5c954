package oci

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
)

// TestVerifyReaderNamesWhatArrived: each way a blob can differ from its descriptor is refused
// with the blob, what was declared and what arrived; the exact bytes pass.
func TestVerifyReaderNamesWhatArrived(t *testing.T) {
	data := bytes.Repeat([]byte("z"), 1000)
	desc := ocispec.Descriptor{MediaType: "archive/zip", Digest: digest.FromBytes(data), Size: 1000}
	other := bytes.Repeat([]byte("y"), 1000)
	cases := []struct {
		name string
		body io.Reader
		is   error
		want []string
	}{
		{"exact", bytes.NewReader(data), nil, nil},
		{"50 MB", io.MultiReader(bytes.NewReader(data), io.LimitReader(zeros{}, 50<<20)), content.ErrTrailingData,
			[]string{desc.Digest.String(), "declared 1000 bytes", "the registry sent more than that (at least 1001)"}},
		{"short", bytes.NewReader(data[:600]), io.ErrUnexpectedEOF,
			[]string{desc.Digest.String(), "declared 1000 bytes", "sent only 600"}},
		{"other bytes", bytes.NewReader(other), content.ErrMismatchedDigest,
			[]string{"declared digest " + desc.Digest.String(), "hash to " + digest.FromBytes(other).String()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			counted := &countReader{r: c.body}
			got, err := io.ReadAll(NewVerifyReader(counted, desc, "the registry"))
			if c.is == nil {
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("exact bytes: %v", err)
				}
				return
			}
			if !errors.Is(err, c.is) {
				t.Fatalf("error %v is not %v", err, c.is)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if counted.n > 1000+32<<10 {
				t.Errorf("read %d bytes of the body: it must stop just past the declared size", counted.n)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// TestSizeReaderChecksSizeOnly: a size-only check refuses more or fewer bytes than declared and
// leaves the digest to whoever hashes the bytes.
func TestSizeReaderChecksSizeOnly(t *testing.T) {
	desc := ocispec.Descriptor{Digest: digest.FromString("something else"), Size: 1000}
	if _, err := io.ReadAll(NewSizeReader(bytes.NewReader(make([]byte, 1000)), desc, "the bundle")); err != nil {
		t.Errorf("the declared size: %v", err)
	}
	if _, err := io.ReadAll(NewSizeReader(bytes.NewReader(make([]byte, 1001)), desc, "the bundle")); !errors.Is(err, content.ErrTrailingData) {
		t.Errorf("one byte more: %v", err)
	}
	if _, err := io.ReadAll(NewSizeReader(bytes.NewReader(make([]byte, 999)), desc, "the bundle")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("one byte fewer: %v", err)
	}
}
