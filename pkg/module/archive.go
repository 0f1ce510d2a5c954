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

	"github.com/oprov/oprov/internal/unzip"
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
func (w *walker) archive(ctx context.Context, r *Resolved, src Source, e *LockEntry) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
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
		return f.dir, nil
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
	dir := w.newDir("archive")
	if err := w.unpackArchive(ctx, typ, body, dir); err != nil {
		locked := "no lock entry"
		if e != nil {
			locked = "locked " + strings.Join(e.Hashes, " ")
		}
		return fail(fmt.Errorf("the archive (%s; %s) is refused: %w; nothing was installed", r.OriginChecksum, locked, err))
	}
	w.remember(src, fetched{dir: dir, origin: r.OriginChecksum})
	return dir, nil
}

// indirect follows an HTTP address that is no archive: GET ?terraform-get=1 and the
// X-Terraform-Get header it answers with, once.
func (w *walker) indirect(ctx context.Context, r *Resolved, u *url.URL, e *LockEntry) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
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

// unpackArchive unpacks an archive into dir (which must not exist), whole or not at all.
func (w *walker) unpackArchive(ctx context.Context, typ string, body []byte, dir string) error {
	switch typ {
	case "zip":
		f := dir + ".zip"
		if err := os.WriteFile(f, body, 0o600); err != nil {
			return err
		}
		defer os.Remove(f)
		lim := unzip.Limits{MaxTotal: w.opts.Limits.MaxPackage, MaxFiles: w.opts.Limits.MaxFiles, MaxRatio: 200}
		return unzip.Extract(ctx, f, filepath.Dir(dir), dir, lim, nil)
	case "tar.gz":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("not a gzip stream: %w", err)
		}
		return w.untar(ctx, zr, dir)
	case "tar":
		return w.untar(ctx, bytes.NewReader(body), dir)
	}
	return fmt.Errorf("archive type %q is not one oprov unpacks (zip, tar.gz, tgz, tar)", typ)
}

// untar unpacks a tar stream into dir: regular files and directories only, no name that leaves
// dir, no name twice, at most MaxFiles entries and MaxPackage bytes as written.
func (w *walker) untar(ctx context.Context, rd io.Reader, dir string) error {
	tmp := dir + ".part"
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tr := tar.NewReader(rd)
	seen := map[string]bool{}
	budget := w.opts.Limits.MaxPackage
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the tar: %w", err)
		}
		if n >= w.opts.Limits.MaxFiles {
			return fmt.Errorf("%w: more than %d entries", errUnsafeArchive, w.opts.Limits.MaxFiles)
		}
		if budget, err = untarEntry(tr, h, tmp, seen, budget); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dir)
}

func untarEntry(tr *tar.Reader, h *tar.Header, tmp string, seen map[string]bool, budget int64) (int64, error) {
	name := strings.TrimPrefix(h.Name, "./")
	if name == "" || name == "." || h.Typeflag == tar.TypeXGlobalHeader {
		return budget, nil
	}
	if err := unzip.CheckEntryPath(name); err != nil {
		return 0, fmt.Errorf("%w: %v", errUnsafeArchive, strings.Replace(err.Error(), "zip entry", "tar entry", 1))
	}
	clean := path.Clean(name)
	if seen[clean] {
		return 0, fmt.Errorf("%w: tar entry %q appears twice", errUnsafeArchive, name)
	}
	seen[clean] = true
	target := filepath.Join(tmp, filepath.FromSlash(clean))
	switch h.Typeflag {
	case tar.TypeDir:
		return budget, os.MkdirAll(target, 0o755)
	case tar.TypeReg:
	default:
		return 0, fmt.Errorf("%w: tar entry %q is not a regular file or directory (links are refused)", errUnsafeArchive, name)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return 0, err
	}
	mode := os.FileMode(0o644)
	if h.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(tr, budget+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("tar entry %q: %w", name, err)
	}
	if n > budget {
		return 0, fmt.Errorf("%w: unpacks to more than %d bytes (a bomb?)", errUnsafeArchive, budget)
	}
	return budget - n, nil
}
