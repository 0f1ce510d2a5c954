package module

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash/unzip"
)

// errUnsafeArchive marks an archive refused: entries that leave its directory, links, or more
// than the limits.
var errUnsafeArchive = unzip.ErrUnsafeArchive

// archiveType is an archive's type from ?archive= or the URL's name: zip, tar.gz or tar.
func archiveType(src Source, u *url.URL) string {
	t := src.Archive
	if t == "" {
		name := strings.ToLower(u.Path)
		for _, s := range []string{".tar.gz", ".tgz", ".zip", ".tar"} {
			if strings.HasSuffix(name, s) {
				t = strings.TrimPrefix(s, ".")
			}
		}
	}
	if t == "tgz" {
		t = "tar.gz"
	}
	return t
}

// archive fetches an HTTP(S) archive (bounded) and unpacks it safely into a temporary directory.
// An address with no archive type is asked, as go-getter asks, for an X-Terraform-Get location.
func (w *walker) archive(ctx context.Context, r *Resolved, src Source, e *LockEntry) (*fetched, error) {
	fail := func(err error) (*fetched, error) {
		return nil, fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
	}
	u, err := url.Parse(src.URL)
	if err != nil {
		return fail(err)
	}
	typ := archiveType(src, u)
	if typ == "" {
		return w.indirect(ctx, r, u, e)
	}
	if f, ok := w.fetched[src.Package()]; ok {
		r.OriginChecksum = f.origin
		return f, nil
	}
	resp, body, err := w.getProgress(ctx, u, w.opts.Limits.MaxPackage, w.opts.Progress)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status))
	}
	sum := sha256.Sum256(body)
	r.OriginChecksum = "sha256:" + hex.EncodeToString(sum[:])
	dir := w.newName("archive")
	held, err := w.unpackArchive(ctx, typ, body, dir)
	if err != nil {
		locked := "no lock entry"
		if e != nil {
			locked = "locked " + strings.Join(e.Hashes, " ")
		}
		return fail(fmt.Errorf("the archive (%s; %s) is refused: %w; nothing was installed", r.OriginChecksum, locked, err))
	}
	f := &fetched{raw: filepath.Join(w.tmp, dir), held: held, origin: r.OriginChecksum}
	w.remember(src, f)
	return f, nil
}

// indirect follows an HTTP address that is no archive: GET ?terraform-get=1 and the
// X-Terraform-Get header it answers with, once.
func (w *walker) indirect(ctx context.Context, r *Resolved, u *url.URL, e *LockEntry) (*fetched, error) {
	fail := func(err error) (*fetched, error) {
		return nil, fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
	}
	if r.Kind == KindRegistry || r.OriginChecksum == "indirect" {
		return fail(fmt.Errorf("%s is not an archive (.zip, .tar.gz, .tgz, .tar or ?archive=)", u.Redacted()))
	}
	q := *u
	v := q.Query()
	v.Set("terraform-get", "1")
	q.RawQuery = v.Encode()
	loc, err := w.download(ctx, &q)
	if err != nil {
		return fail(fmt.Errorf("%s is no archive (.zip, .tar.gz, .tgz, .tar or ?archive=) and gives no X-Terraform-Get location: %w", u.Redacted(), err))
	}
	inner, err := ParseSource(loc)
	if err != nil || (inner.Kind != KindGit && inner.Kind != kindHTTP) {
		return fail(fmt.Errorf("the X-Terraform-Get location %q is not a git or HTTP(S) archive address", loc))
	}
	if inner.Subdir != "" {
		r.Subdir = path.Join(inner.Subdir, r.Subdir)
	}
	r.OriginChecksum = "indirect"
	if inner.Kind == KindGit {
		return w.git(ctx, r, inner)
	}
	return w.archive(ctx, r, inner, e)
}

// unpackArchive unpacks an archive into dir (a name in the walk's root, which must not exist),
// whole or not at all, within the package's limits and the walk's budget, which it charges.
func (w *walker) unpackArchive(ctx context.Context, typ string, body []byte, dir string) (usage, error) {
	switch typ {
	case "zip":
		u, err := zipDeclared(body, w.opts.Limits.MaxRatio)
		if err != nil {
			return usage{}, err
		}
		if err := w.budget.charge("the archive", u); err != nil {
			return usage{}, err
		}
		lim := unzip.Limits{MaxTotal: w.opts.Limits.MaxPackage, MaxFiles: w.opts.Limits.MaxFiles, MaxRatio: w.opts.Limits.MaxRatio}
		if _, err := modulepkg.UnpackIn(ctx, body, w.root, dir, lim); err != nil {
			w.budget.credit(u)
			return usage{}, err
		}
		return u, nil
	case "tar.gz":
		in := &counter{r: bytes.NewReader(body)}
		zr, err := gzip.NewReader(in)
		if err != nil {
			return usage{}, fmt.Errorf("not a gzip stream: %w", err)
		}
		return w.untar(ctx, &counter{r: &ratioReader{r: zr, in: in, maxRatio: w.opts.Limits.MaxRatio}}, dir)
	case "tar":
		return w.untar(ctx, &counter{r: bytes.NewReader(body)}, dir)
	}
	return usage{}, fmt.Errorf("archive type %q is not one oprov unpacks (zip, tar.gz, tgz, tar)", typ)
}

// untar unpacks a tar stream into dir (a name in the walk's root): regular files and directories
// only, no name that leaves dir, no name twice, at most MaxFiles entries and MaxPackage bytes as
// written, each byte charged to the walk's budget as it is written. rd counts the tar's bytes:
// no entry may write more than it took from the tar (a sparse file's holes).
func (w *walker) untar(ctx context.Context, rd *counter, dir string) (usage, error) {
	tmp := dir + ".part"
	if err := w.root.Mkdir(tmp, 0o700); err != nil {
		return usage{}, err
	}
	x := &untarring{w: w, tmp: tmp, seen: map[string]bool{}, left: w.opts.Limits.MaxPackage, in: rd}
	defer func() {
		w.root.RemoveAll(tmp)
		if x.held != (usage{}) && !x.done {
			w.budget.credit(x.held)
		}
	}()
	tr := tar.NewReader(rd)
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return usage{}, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var le *oci.LimitError
			if errors.As(err, &le) {
				return usage{}, err
			}
			return usage{}, fmt.Errorf("reading the tar: %w", err)
		}
		if n >= w.opts.Limits.MaxFiles {
			return usage{}, fmt.Errorf("%w: more than %d entries", errUnsafeArchive, w.opts.Limits.MaxFiles)
		}
		if err := x.entry(tr, h); err != nil {
			return usage{}, err
		}
	}
	if err := w.root.Rename(tmp, dir); err != nil {
		return usage{}, err
	}
	x.done = true
	return x.held, nil
}

// untarring is one tar being unpacked: what it has written (charged), and what the package may
// still write.
type untarring struct {
	w    *walker
	tmp  string
	seen map[string]bool
	left int64 // bytes of the package's limit left
	in   *counter
	held usage
	done bool
}

func (x *untarring) entry(tr *tar.Reader, h *tar.Header) error {
	name := strings.TrimPrefix(h.Name, "./")
	if name == "" || name == "." || h.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if err := unzip.CheckEntryPath(name); err != nil {
		return fmt.Errorf("%w: %v", errUnsafeArchive, strings.Replace(err.Error(), "zip entry", "tar entry", 1))
	}
	clean := path.Clean(name)
	if x.seen[clean] {
		return fmt.Errorf("%w: tar entry %q appears twice", errUnsafeArchive, name)
	}
	x.seen[clean] = true
	target := path.Join(x.tmp, clean)
	root := x.w.root
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return fmt.Errorf("%w: tar entry %q is a sparse file (PAX record %s): its holes would unpack to bytes the archive does not hold; repack it without --sparse", errUnsafeArchive, name, k)
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return root.MkdirAll(target, 0o755)
	case tar.TypeGNUSparse:
		return fmt.Errorf("%w: tar entry %q is a GNU sparse file: its holes would unpack to bytes the archive does not hold; repack it without --sparse", errUnsafeArchive, name)
	case tar.TypeReg:
	default:
		return fmt.Errorf("%w: tar entry %q is not a regular file or directory (links are refused)", errUnsafeArchive, name)
	}
	if err := x.w.budget.charge("the archive", usage{files: 1}); err != nil {
		return err
	}
	x.held.files++
	if err := root.MkdirAll(path.Dir(target), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if h.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	// Never more than the package's limit or the walk's budget allows, whatever the header says.
	packageBinds := x.left <= x.w.budget.room()
	allow := min(x.left, x.w.budget.room())
	from := x.in.n
	n, err := io.Copy(f, io.LimitReader(tr, allow+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > x.in.n-from {
		// Whatever the header said, a regular entry's bytes come from the tar, one for one.
		err = fmt.Errorf("%w: tar entry %q is a sparse file: %d bytes unpacked from %d of the archive; repack it without --sparse", errUnsafeArchive, name, n, x.in.n-from)
	}
	charged := min(n, allow)
	x.w.budget.bytes += charged
	x.held.bytes += charged
	x.left -= charged
	var le *oci.LimitError
	switch {
	case errors.As(err, &le):
		return err
	case err != nil:
		return fmt.Errorf("tar entry %q: %w", name, err)
	case n > allow && packageBinds:
		return fmt.Errorf("%w: unpacks to more than %d bytes (a bomb?)", errUnsafeArchive, x.w.opts.Limits.MaxPackage)
	case n > allow:
		return x.w.budget.charge(fmt.Sprintf("tar entry %q", name), usage{bytes: n - allow})
	}
	return nil
}
