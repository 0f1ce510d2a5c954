package bundle

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"

	ociref "github.com/oprov/oprov/pkg/oci"
)

// Bounds on what a bundle's files may hold, beside the blobs (bounded by the maximum package
// size). A listing carries one digest a blob (about 75 bytes) and one entry a provider; an index
// one entry a tag: these leave room for hundreds of thousands of either.
const (
	maxListingSize = 32 << 20
	maxIndexSize   = 32 << 20
	maxLayoutSize  = 4 << 10
)

// entryLimits gives the largest size a bundle's entry may declare, and what it is, for messages.
func entryLimits(name string, maxBlob int64) (int64, string) {
	switch name {
	case listingName:
		return maxListingSize, "the listing"
	case "index.json":
		return maxIndexSize, "the layout's index"
	case "oci-layout":
		return maxLayoutSize, "the layout marker"
	}
	if maxBlob <= 0 {
		maxBlob = ociref.DefaultLimits().MaxPackageSize
	}
	return maxBlob, "a blob (raise the " + string(ociref.SettingMaxPackageSize) + " if that is expected)"
}

// checkTarball reads every header of a bundle's tarball (skipping the data, which it does not
// read) and refuses, before anything else reads it, a tarball that holds anything but regular
// files and directories (sparse files, links, devices, FIFOs), an entry twice, or an entry over
// its bound: a 30 KiB tarball must not make a reader expand a 64 GiB sparse file.
func checkTarball(ctx context.Context, path string, maxBlob int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkTarStream(ctx, f, path, maxBlob)
}

// checkTarStream is checkTarball on a stream (a file skips the data by seeking).
func checkTarStream(ctx context.Context, r io.Reader, path string, maxBlob int64) error {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s is not a readable tarball: %w", path, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := checkEntry(h, maxBlob); err != nil {
			return fmt.Errorf("%s: entry %q: %w; a bundle is refused whole, so nothing was written", path, h.Name, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if seen[name] {
			return fmt.Errorf("%s: entry %q appears twice (which one a reader takes is up to the reader); a bundle is refused whole, so nothing was written", path, h.Name)
		}
		seen[name] = true
	}
}

// checkEntry refuses one tar entry that a bundle never holds, or that is larger than its kind
// may be.
func checkEntry(h *tar.Header, maxBlob int64) error {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return fmt.Errorf("a sparse file (GNU sparse PAX record %s, %d bytes once expanded): a bundle holds only regular files and directories", k, h.Size)
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return nil
	//lint:ignore SA1019 TypeRegA is how old writers mark a regular file
	case tar.TypeReg, tar.TypeRegA:
	case tar.TypeGNUSparse:
		return fmt.Errorf("a sparse file (GNU sparse, %d bytes once expanded): a bundle holds only regular files and directories", h.Size)
	case tar.TypeSymlink, tar.TypeLink:
		return fmt.Errorf("a link to %q: a bundle holds only regular files and directories", h.Linkname)
	default:
		return fmt.Errorf("of type %q (a device, FIFO or other special file): a bundle holds only regular files and directories", string(h.Typeflag))
	}
	limit, what := entryLimits(strings.TrimPrefix(h.Name, "./"), maxBlob)
	if h.Size < 0 || h.Size > limit {
		return fmt.Errorf("declares %d bytes, over the %d bytes %s may hold", h.Size, limit, what)
	}
	return nil
}

// Repository path components as the OCI distribution specification defines them: lowercase
// letters and digits, separated by one '.', one or two '_', or any number of '-'.
var repoComponent = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`) })

// tagName is a tag as the distribution specification allows it.
var tagName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`) })

// errBadName is wrapped by every refusal of a repository or tag name in a bundle.
var errBadName = errors.New("not a valid OCI name")

// checkRepository refuses a repository path from a bundle that is not a valid OCI repository
// path: one that could leave the place it is loaded into ("..", "/x", "a//b", "a\\b") or that a
// registry would refuse half-way through a load.
func checkRepository(repo string) error {
	if repo == "" || len(repo) > 255 {
		return fmt.Errorf("repository %q: %w (empty, or over 255 characters)", repo, errBadName)
	}
	for _, part := range strings.Split(repo, "/") {
		if !repoComponent().MatchString(part) {
			return fmt.Errorf("repository %q: %w: its part %q is not lowercase letters and digits joined by '.', '_', '__' or '-' (no \"..\", no empty part, no leading '/', no '\\')", repo, errBadName, part)
		}
	}
	return nil
}

// checkTag refuses a tag from a bundle that is not a valid OCI tag.
func checkTag(repo, tag string) error {
	if !tagName().MatchString(tag) {
		return fmt.Errorf("repository %q: tag %q: %w (letters, digits, '_', '.', '-', at most 128, not starting with '.' or '-')", repo, tag, errBadName)
	}
	return nil
}

// readBounded reads all of r, refusing more than limit bytes (what names it in the message).
func readBounded(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is over %d bytes: refused without reading the rest", what, limit)
	}
	return data, nil
}
