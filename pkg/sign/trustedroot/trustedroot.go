// Package trustedroot fetches Sigstore's trusted root (trusted_root.json), the trust material
// keyless verification needs, through TUF: sigstore-go's TUF client, against the public-good
// repository with the TUF root built into sigstore-go, or against a mirror or a private
// repository with its own root.json. go-tuf checks root rotation, signatures and thresholds,
// expiry, versions and the target's length and hashes; this package bounds what it downloads,
// reads file:// mirrors, keeps the metadata where its caller says, and checks that the target is
// a trusted root with at least one certificate authority.
//
// Fetch's errors are an *Error whose Kind says what went wrong (the options, the network, or
// what the repository served) and whose Reason says which check, for a caller to word; a
// cancelled context gives the context's error. It prints nothing and knows no flag.
package trustedroot

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
	"sort"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata"
	"github.com/theupdateframework/go-tuf/v2/metadata/fetcher"
)

// Target is the TUF target that holds Sigstore's trusted root.
const Target = "trusted_root.json"

// DefaultRepository is the public-good Sigstore TUF repository, the one Fetch reads when
// Options.Repository is empty.
const DefaultRepository = tuf.DefaultMirror

// maxTrustedRootSize bounds the trusted root Fetch downloads: the public-good one is about 10 KiB.
const maxTrustedRootSize = 4 << 20

// MaxTUFRootSize bounds the TUF root.json a caller may give (Options.TUFRoot).
const MaxTUFRootSize = 512 << 10

// Options say where to fetch the trusted root from and what vouches for it.
type Options struct {
	// Repository is the TUF repository or a mirror of it: an https://, http:// or file:// URL.
	// Empty means DefaultRepository.
	Repository string
	// TUFRoot is the repository's root.json, obtained out of band. Nil means the public-good
	// root built into sigstore-go (right for DefaultRepository and its mirrors only); an empty
	// one is not a TUF root.
	TUFRoot []byte
	// CacheDir keeps the TUF metadata (a directory per repository below it); it is always
	// refreshed.
	CacheDir string
	// Timeout bounds the whole update; zero means only ctx bounds it.
	Timeout time.Duration
	// UserAgent is sent with every HTTP request.
	UserAgent string
}

// Result is a trusted root TUF vouched for, checked to be one.
type Result struct {
	JSON       []byte // trusted_root.json as the repository serves it
	Repository string // the repository it came from (Options.Repository without a trailing /)
	Summary    Summary
}

// Summary is what a trusted root holds: its authorities and logs with their validity.
type Summary struct {
	CAs    []Entry `json:"certificate_authorities"`
	TSAs   []Entry `json:"timestamp_authorities"`
	Logs   []Entry `json:"transparency_logs"`
	CTLogs []Entry `json:"ct_logs"`
}

// Entry is one authority or log: its URI (as the trusted root gives it, unescaped) and when it
// is valid (nil: always, or until now).
type Entry struct {
	URI   string     `json:"uri"`
	Start *time.Time `json:"valid_from,omitempty"`
	End   *time.Time `json:"valid_until,omitempty"`
}

// Kind is what a failed fetch comes to, for a caller to decide what to do.
type Kind string

const (
	// BadInput: the options are wrong (the repository URL, the TUF root); asking again with
	// the same ones fails the same way.
	BadInput Kind = "bad input"
	// Unreachable: the repository did not answer, or not in time.
	Unreachable Kind = "unreachable"
	// Refused: the repository answered, and what it served is not to be trusted: a signature
	// by a key the root does not list, expired metadata, a file that does not match the
	// metadata, one over the bounds, or a target that is no usable trusted root.
	Refused Kind = "refused"
	// Failed: anything else.
	Failed Kind = "failed"
)

// Reason is which check failed.
type Reason int

const (
	_                      Reason = iota // 0, for Kind Failed: Err says
	BadURL                               // BadInput: not an https://, http:// or file:// URL
	BadURLPath                           // BadInput: a URL that names no cache directory
	TUFRootTooLarge                      // BadInput: Options.TUFRoot is over MaxTUFRootSize
	NotTUFRoot                           // BadInput: Options.TUFRoot does not parse as a TUF root
	TUFRootNotSelfSigned                 // BadInput: Options.TUFRoot is not signed by its own keys
	TimedOut                             // Unreachable: the timeout or ctx's deadline passed
	NotReached                           // Unreachable: a network or HTTP error
	RefusedByTUF                         // Refused: go-tuf refused the metadata or target, or over the bound
	NotTrustedRoot                       // Refused: the target does not parse as a trusted root
	NoCertificateAuthority               // Refused: the trusted root lists no certificate authority
)

// Error is a failed fetch.
type Error struct {
	Kind       Kind
	Reason     Reason
	Repository string        // the repository (as given, for BadURL and BadURLPath)
	Timeout    time.Duration // the bound that passed, for TimedOut
	Err        error         // the cause, when there is one
}

func (e *Error) Error() string {
	switch e.Reason {
	case BadURL:
		return fmt.Sprintf("%q: give an https://, http:// or file:// URL of a TUF repository", e.Repository)
	case BadURLPath:
		return fmt.Sprintf("%q: give the URL of a TUF repository (it also names the repository's cache directory)", e.Repository)
	case TUFRootTooLarge:
		return fmt.Sprintf("the TUF root is over %d KiB: it is not a TUF root.json", MaxTUFRootSize>>10)
	case NotTUFRoot:
		return fmt.Sprintf("the TUF root is not a TUF root.json (%v)", e.Err)
	case TUFRootNotSelfSigned:
		return fmt.Sprintf("the TUF root is not signed by its own root keys (%v)", e.Err)
	case TimedOut:
		return fmt.Sprintf("%s did not answer within %s", e.Repository, e.Timeout)
	case NotReached:
		return fmt.Sprintf("could not fetch from %s: %v", e.Repository, e.Err)
	case RefusedByTUF:
		return fmt.Sprintf("refused what %s served: %v", e.Repository, e.Err)
	case NotTrustedRoot:
		return fmt.Sprintf("%s holds a %s that TUF vouches for, but it is not a trusted root: %v", e.Repository, Target, e.Err)
	case NoCertificateAuthority:
		return fmt.Sprintf("the trusted root from %s lists no certificate authority: it cannot vouch for a keyless signature", e.Repository)
	}
	return fmt.Sprintf("%s: %v", e.Repository, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Repository checks a repository URL and gives it as Fetch uses it: without a trailing /, or
// DefaultRepository for "". A bad one is an *Error of Kind BadInput.
func Repository(u string) (string, error) {
	if u == "" {
		return DefaultRepository, nil
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http" && p.Scheme != "file") || (p.Scheme != "file" && p.Host == "") {
		return "", &Error{Kind: BadInput, Reason: BadURL, Repository: u}
	}
	repo := strings.TrimSuffix(u, "/")
	if d := tuf.URLToPath(repo); d == "" || d == "." || d == ".." || strings.ContainsAny(d, `\`) {
		return "", &Error{Kind: BadInput, Reason: BadURLPath, Repository: u}
	}
	return repo, nil
}

// CheckTUFRoot checks that data is a TUF root.json signed by its own keys, no larger than
// MaxTUFRootSize, as Fetch does with Options.TUFRoot. A bad one is an *Error of Kind BadInput.
func CheckTUFRoot(data []byte) error {
	if len(data) > MaxTUFRootSize {
		return &Error{Kind: BadInput, Reason: TUFRootTooLarge}
	}
	r, err := metadata.Root().FromBytes(data)
	if err != nil {
		return &Error{Kind: BadInput, Reason: NotTUFRoot, Err: err}
	}
	if err := r.VerifyDelegate(metadata.ROOT, r); err != nil {
		return &Error{Kind: BadInput, Reason: TUFRootNotSelfSigned, Err: err}
	}
	return nil
}

// Fetch runs a TUF update against the repository, trusting the TUF root (or the newer roots it
// signs), and gives the trusted root target once it parses as a trusted root with at least one
// certificate authority. Errors are an *Error, or ctx's error once ctx is cancelled.
func Fetch(ctx context.Context, opts Options) (*Result, error) {
	repo, err := Repository(opts.Repository)
	if err != nil {
		return nil, err
	}
	tufRoot := opts.TUFRoot
	if tufRoot == nil {
		tufRoot = tuf.DefaultRoot()
	} else if err := CheckTUFRoot(tufRoot); err != nil {
		return nil, err
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	data, err := update(ctx, repo, tufRoot, opts)
	if err != nil {
		return nil, classify(ctx, repo, opts.Timeout, err)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, &Error{Kind: Refused, Reason: NotTrustedRoot, Repository: repo, Err: err}
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return nil, &Error{Kind: Refused, Reason: NoCertificateAuthority, Repository: repo}
	}
	return &Result{JSON: data, Repository: repo, Summary: summarize(tr)}, nil
}

// update runs the TUF client and returns the target's bytes; it returns once ctx is done even
// if the client has not.
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

// classify says what a failed TUF update comes to: the time ran out, the repository could not
// be reached, or what it served was refused.
func classify(ctx context.Context, repo string, timeout time.Duration, err error) error {
	var ot *oversizedTarget
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Error{Kind: Unreachable, Reason: TimedOut, Repository: repo, Timeout: timeout, Err: ctx.Err()}
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &ot), errors.Is(err, &metadata.ErrRepository{}), errors.Is(err, &metadata.ErrDownloadLengthMismatch{}):
		return &Error{Kind: Refused, Reason: RefusedByTUF, Repository: repo, Err: err}
	case errors.Is(err, &metadata.ErrDownloadHTTP{}), errors.As(err, &ue), errors.As(err, &ne):
		return &Error{Kind: Unreachable, Reason: NotReached, Repository: repo, Err: err}
	}
	return &Error{Kind: Failed, Repository: repo, Err: err}
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

// boundedFetcher refuses a trusted root the targets metadata says is larger than oprov accepts,
// before downloading it. go-tuf bounds the metadata files itself (timestamp 16 KiB, root 512 KB,
// snapshot 2 MB, targets 5 MB) and every download to the length the metadata gives.
type boundedFetcher struct{ f fetcher.Fetcher }

func (b boundedFetcher) DownloadFile(u string, maxLength int64, timeout time.Duration) ([]byte, error) {
	if strings.HasSuffix(u, Target) && maxLength > maxTrustedRootSize {
		return nil, &oversizedTarget{u, maxLength}
	}
	return b.f.DownloadFile(u, maxLength, timeout)
}

type oversizedTarget struct {
	url    string
	length int64
}

func (e *oversizedTarget) Error() string {
	return fmt.Sprintf("the repository's targets metadata gives %s as %d bytes, over the %d MiB oprov accepts for a trusted root", e.url, e.length, maxTrustedRootSize>>20)
}

func newEntry(uri string, start, end time.Time) Entry {
	e := Entry{URI: uri}
	if !start.IsZero() {
		s := start.UTC()
		e.Start = &s
	}
	if !end.IsZero() {
		t := end.UTC()
		e.End = &t
	}
	return e
}

func summarize(tr *root.TrustedRoot) Summary {
	s := Summary{CAs: []Entry{}, TSAs: []Entry{}}
	for _, ca := range tr.FulcioCertificateAuthorities() {
		if f, ok := ca.(*root.FulcioCertificateAuthority); ok {
			s.CAs = append(s.CAs, newEntry(f.URI, f.ValidityPeriodStart, f.ValidityPeriodEnd))
		}
	}
	for _, ta := range tr.TimestampingAuthorities() {
		if t, ok := ta.(*root.SigstoreTimestampingAuthority); ok {
			s.TSAs = append(s.TSAs, newEntry(t.URI, t.ValidityPeriodStart, t.ValidityPeriodEnd))
		}
	}
	s.Logs, s.CTLogs = logEntries(tr.RekorLogs()), logEntries(tr.CTLogs())
	return s
}

func logEntries(logs map[string]*root.TransparencyLog) []Entry {
	out := []Entry{}
	for _, l := range logs {
		out = append(out, newEntry(l.BaseURL, l.ValidityPeriodStart, l.ValidityPeriodEnd))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].URI != out[j].URI {
			return out[i].URI < out[j].URI
		}
		return out[i].Start != nil && (out[j].Start == nil || out[i].Start.Before(*out[j].Start))
	})
	return out
}
