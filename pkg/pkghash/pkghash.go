// Package pkghash computes a provider package's lock-file hashes as OpenTofu records them:
// zh: (the sha256 of the zip) and h1: (dirhash's Hash1 over the zip's entries).
package pkghash

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/oprov/oprov/internal/iox"
)

// Hashes are a package's lock-file hashes.
type Hashes struct {
	ZH string `json:"zh"` // "zh:" + hex sha256 of the zip
	H1 string `json:"h1"` // "h1:" + dirhash Hash1 of the zip's contents
}

// ZH formats a zip's sha256 (raw bytes or hex) as a lock-file zh: hash.
func ZH(hexSum string) string { return "zh:" + hexSum }

// ZipH1 computes a zip's h1: hash (dirhash Hash1 over its entries, as OpenTofu computes it for
// a zip) without unpacking it, ending when ctx is done.
func ZipH1(ctx context.Context, path string) (string, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return "", fmt.Errorf("h1 hash of %s: %w", path, err)
	}
	defer zr.Close()
	h1, err := ReaderH1(ctx, &zr.Reader)
	if err != nil {
		return "", fmt.Errorf("h1 hash of %s: %w", path, err)
	}
	return h1, nil
}

// ReaderH1 computes an opened zip's h1: hash, as ZipH1 does, ending when ctx is done.
func ReaderH1(ctx context.Context, zr *zip.Reader) (string, error) {
	sums := map[string][]byte{}
	for _, f := range zr.File {
		if _, dup := sums[f.Name]; dup {
			return "", fmt.Errorf("zip entry %q appears twice", f.Name)
		}
		sums[f.Name] = nil
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return "", err
		}
		h := sha256.New()
		_, err = io.Copy(h, iox.ContextReader(ctx, rc))
		rc.Close()
		if err != nil {
			return "", err
		}
		sums[f.Name] = h.Sum(nil)
	}
	return H1(sums)
}

// H1 is dirhash's Hash1 over entries' sha256s, by entry name: the sha256 of the sorted lines
// "<hex sha256>  <name>\n", in base64, after "h1:".
func H1(sums map[string][]byte) (string, error) {
	names := make([]string, 0, len(sums))
	for n := range sums {
		if strings.Contains(n, "\n") {
			return "", fmt.Errorf("zip entry %q has a newline in its name, which h1: cannot hash", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%x  %s\n", sums[n], n)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}
