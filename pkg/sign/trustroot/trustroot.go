// Package trustroot fetches Sigstore's trusted root (trusted_root.json), which keyless
// verification needs, through TUF, as cosign and gh do: TUF checks that the file is the one the
// repository's keys signed, that the metadata is fresh, and that no mirror changed it. It returns
// the bytes only once they parse as a trusted root with at least one certificate authority, and
// says why it failed with an *Error of one Kind; what to do about it (exit codes, flags) is the
// caller's.
package trustroot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata"
	"github.com/theupdateframework/go-tuf/v2/metadata/fetcher"
)

// Target is the TUF target that holds Sigstore's trusted root.
const Target = "trusted_root.json"

// MaxSize bounds the trusted root fetched: the public-good one is about 10 KiB.
const MaxSize = 4 << 20

// MaxTUFRootSize bounds a TUF root.json read with ReadTUFRoot.
const MaxTUFRootSize = 512 << 10

// DefaultMirror is the public-good Sigstore instance's TUF repository, which the TUF root built
// into oprov vouches for.
const DefaultMirror = tuf.DefaultMirror

// Kind says what a failure means for the one who asked.
type Kind int

const (
	// failed is anything else.
	failed Kind = iota
	// Unreachable: the repository could not be reached.
	Unreachable
	// TimedOut: the repository did not answer before the context's deadline.
	TimedOut
	// Refused: TUF refused what the repository served (metadata not signed by the root's keys,
	// expired, a target that does not match it or is too large).
	Refused
	// Unusable: TUF vouches for the target, but it is not a trusted root that can vouch for a
	// keyless signature.
	Unusable
	// BadInput: a repository URL or a TUF root.json that is not one.
	BadInput
)

// Error is a failure of this package, of one Kind.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func failure(k Kind, format string, a ...any) error {
	return &Error{Kind: k, Err: fmt.Errorf(format, a...)}
}

// KindOf is err's Kind (none of those named when it is not an *Error).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return failed
}

// Options say where to fetch from.
type Options struct {
	// Repository is the TUF repository, or a mirror of it: https://, http:// or file:// (see
	// CheckRepository); empty is DefaultMirror.
	Repository string
	// TUFRoot is the repository's root.json, obtained out of band (ReadTUFRoot); nil is the
	// public-good root built in, for DefaultMirror or a mirror of it.
	TUFRoot []byte
	// CacheDir keeps TUF's metadata between runs.
	CacheDir string
	// UserAgent names the client in HTTP requests.
	UserAgent string
}

// CheckRepository checks a repository URL and gives it as Fetch uses it (no trailing slash).
func CheckRepository(repo string) (string, error) {
	u, err := url.Parse(repo)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file") || (u.Scheme != "file" && u.Host == "") {
		return "", failure(BadInput, "give an https://, http:// or file:// URL of a TUF repository")
	}
	repo = strings.TrimSuffix(repo, "/")
	if d := tuf.URLToPath(repo); d == "" || d == "." || d == ".." || strings.ContainsAny(d, `\`) {
		return "", failure(BadInput, "give the URL of a TUF repository (it also names the repository's cache directory)")
	}
	return repo, nil
}

// ReadTUFRoot reads a TUF root.json and checks that it is one, signed by its own root keys.
func ReadTUFRoot(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Kind: BadInput, Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxTUFRootSize+1))
	if err != nil {
		return nil, failure(BadInput, "%s: %v", path, err)
	}
	if len(data) > MaxTUFRootSize {
		return nil, failure(BadInput, "%s is over %d KiB: it is not a TUF root.json", path, MaxTUFRootSize>>10)
	}
	r, err := metadata.Root().FromBytes(data)
	if err != nil {
		return nil, failure(BadInput, "%s is not a TUF root.json (%v): give the root.json of the repository it is for", path, err)
	}
	if err := r.VerifyDelegate(metadata.ROOT, r); err != nil {
		return nil, failure(BadInput, "%s is not signed by its own root keys (%v): get the repository's root.json again", path, err)
	}
	return data, nil
}

// Fetch runs a TUF update against the repository, trusting its root (or the newer roots it
// signs), and gives the trusted root's bytes and the trusted root they parse as. It gives up at
// ctx's deadline (TimedOut).
func Fetch(ctx context.Context, o Options) ([]byte, *root.TrustedRoot, error) {
	repo := o.Repository
	if repo == "" {
		repo = DefaultMirror
	}
	tufRoot := o.TUFRoot
	if tufRoot == nil {
		tufRoot = tuf.DefaultRoot()
	}
	data, err := update(ctx, repo, tufRoot, o)
	if err != nil {
		return nil, nil, classify(ctx, repo, err)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, nil, failure(Unusable, "%s holds a %s that TUF vouches for, but it is not a trusted root: %v", repo, Target, err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return nil, nil, failure(Unusable, "the trusted root from %s lists no certificate authority: it cannot vouch for a keyless signature", repo)
	}
	return data, tr, nil
}

// update is the TUF client's run, given up when ctx ends.
func update(ctx context.Context, repo string, tufRoot []byte, o Options) ([]byte, error) {
	opts := tuf.DefaultOptions()
	opts.Root = tufRoot
	opts.RepositoryBaseURL = repo
	opts.CachePath = o.CacheDir
	opts.CacheValidity = tuf.NoCache
	opts.Context = ctx
	f := fetcher.NewDefaultFetcher()
	if o.UserAgent != "" {
		f.SetHTTPUserAgent(o.UserAgent)
	}
	f.SetHTTPClient(&http.Client{Transport: transport(ctx)})
	opts.Fetcher = boundedFetcher{f}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c, err := tuf.New(opts)
		if err != nil {
			done <- result{nil, err}
			return
		}
		data, err := c.GetTarget(Target)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// classify says what a TUF update's failure means: the repository did not answer in time, could
// not be reached, or served what TUF refused.
func classify(ctx context.Context, repo string, err error) error {
	var ot *oversizedTarget
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failure(TimedOut, "%s did not answer in time", repo)
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &ot), errors.Is(err, &metadata.ErrRepository{}), errors.Is(err, &metadata.ErrDownloadLengthMismatch{}):
		return failure(Refused, "refused what %s served: %v", repo, err)
	case errors.Is(err, &metadata.ErrDownloadHTTP{}), errors.As(err, &ue), errors.As(err, &ne):
		return failure(Unreachable, "could not fetch from %s: %v", repo, err)
	}
	return &Error{Kind: failed, Err: fmt.Errorf("%s: %w", repo, err)}
}

// transport is HTTP(S) as usual, bound to ctx, plus file:// for a mirror on disk.
func transport(ctx context.Context) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.RegisterProtocol("file", fileTransport{})
	return ctxTransport{ctx, t}
}

type ctxTransport struct {
	ctx context.Context
	rt  http.RoundTripper
}

func (c ctxTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.rt.RoundTrip(req.WithContext(c.ctx))
}

// fileTransport answers file:// requests from the local file system: 404 for a file that does
// not exist, as a web server would (TUF reads a 404 as "no newer root").
type fileTransport struct{}

func (fileTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := req.URL.Path
	if runtime.GOOS == "windows" && len(p) > 2 && p[0] == '/' && p[2] == ':' {
		p = p[1:] // file:///C:/dir
	}
	f, err := os.Open(filepath.FromSlash(p))
	status, body := http.StatusOK, io.ReadCloser(nil)
	switch {
	case errors.Is(err, os.ErrNotExist):
		status, body = http.StatusNotFound, io.NopCloser(bytes.NewReader(nil))
	case err != nil:
		return nil, err
	default:
		body = f
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: body, Header: http.Header{},
		ContentLength: -1, Proto: "HTTP/1.0", ProtoMajor: 1, Request: req}, nil
}

// boundedFetcher refuses a trusted root the targets metadata says is larger than MaxSize, before
// downloading it.
type boundedFetcher struct{ f fetcher.Fetcher }

func (b boundedFetcher) DownloadFile(u string, maxLength int64, timeout time.Duration) ([]byte, error) {
	if strings.HasSuffix(u, Target) && maxLength > MaxSize {
		return nil, &oversizedTarget{u, maxLength}
	}
	return b.f.DownloadFile(u, maxLength, timeout)
}

type oversizedTarget struct {
	url    string
	length int64
}

func (e *oversizedTarget) Error() string {
	return fmt.Sprintf("the repository's targets metadata gives %s as %d bytes, over the %d MiB oprov accepts for a trusted root", e.url, e.length, MaxSize>>20)
}
