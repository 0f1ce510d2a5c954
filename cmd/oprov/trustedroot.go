package main

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
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/spf13/cobra"
	"github.com/theupdateframework/go-tuf/v2/metadata"
	"github.com/theupdateframework/go-tuf/v2/metadata/fetcher"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/cache"
)

// trustedRootTarget is the TUF target that holds Sigstore's trusted root.
const trustedRootTarget = "trusted_root.json"

// maxTrustedRootSize bounds the trusted root oprov downloads: the public-good one is about 10 KiB.
const maxTrustedRootSize = 4 << 20

// maxTUFRootSize bounds the --tuf-root file.
const maxTUFRootSize = 512 << 10

type trustedRootOptions struct {
	io      *IOStreams
	Out     string
	TUFURL  string
	TUFRoot string
	Timeout time.Duration
	output  outputFlag
}

func newTrustedRootCmd(ios *IOStreams) *cobra.Command {
	o := &trustedRootOptions{io: ios}
	c := &cobra.Command{
		Use:   "trusted-root [--to FILE] [--tuf-url URL --tuf-root ROOT.json]",
		Short: "Fetch Sigstore's trusted_root.json through TUF, for keyless verification offline",
		Long: `Fetch the trusted root that keyless verification needs (--trusted-root of verify and
verify-blob), through TUF, as cosign and gh do. TUF checks that the file is the one the
repository's keys signed, that the metadata is fresh, and that no mirror changed it.

By default this is the public-good Sigstore instance (` + tuf.DefaultMirror + `), checked
against the TUF root built into oprov. For a private Sigstore instance, or a mirror of one
inside an air gap, give --tuf-url (https://, http:// or file://) and --tuf-root, the
repository's root.json obtained out of band. A mirror of the public-good repository needs only
--tuf-url.

This is the one oprov command that reaches the network for trust material: verify and
verify-blob never do. Run it once, check what it prints, and pass the file on.

The file is written whole or not at all, only once it parses as a trusted root with at least
one certificate authority. TUF metadata is kept in oprov's cache directory, under tuf/.

Exit codes: 0 written; 10 refused (metadata not signed by the root's keys, expired, or a file
that does not match it); 3 the repository could not be reached or timed out; 2 a bad flag or
--tuf-root file; 1 anything else.`,
		Example: `  oprov trusted-root
  oprov trusted-root --to /etc/oprov/trusted_root.json -o json
  oprov trusted-root --tuf-url file:///media/usb/tuf --tuf-root root.json --to trusted_root.json`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return runTrustedRoot(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Out, "to", "trusted_root.json", "the file to write")
	c.Flags().StringVar(&o.TUFURL, "tuf-url", "", "the TUF repository or a mirror of it (default "+tuf.DefaultMirror+")")
	c.Flags().StringVar(&o.TUFRoot, "tuf-root", "", "the TUF repository's root.json, obtained out of band (default: the public-good root built in)")
	c.Flags().DurationVar(&o.Timeout, "timeout", 2*time.Minute, "give up after this long")
	o.output.pathHint = "--to"
	o.output.register(c)
	return c
}

// source checks the flags and gives the repository to fetch from and the TUF root that vouches
// for it.
func (o *trustedRootOptions) source() (repo string, tufRoot []byte, err error) {
	if o.TUFRoot != "" && o.TUFURL == "" {
		return "", nil, usageErrorf("trusted-root: --tuf-root needs --tuf-url, the repository that root.json is for")
	}
	if o.Out == "" {
		return "", nil, usageErrorf("trusted-root: --to is empty: give the file to write")
	}
	if o.Timeout <= 0 {
		return "", nil, usageErrorf("trusted-root: --timeout %s: give a positive duration, such as 2m", o.Timeout)
	}
	if st, err := os.Stat(o.Out); err == nil && st.IsDir() {
		return "", nil, usageErrorf("trusted-root: --to %s is a directory: give a file name", o.Out)
	}
	if st, err := os.Stat(filepath.Dir(o.Out)); err != nil || !st.IsDir() {
		return "", nil, usageErrorf("trusted-root: --to %s: its directory %s does not exist", o.Out, filepath.Dir(o.Out))
	}
	repo = tuf.DefaultMirror
	tufRoot = tuf.DefaultRoot()
	if o.TUFURL != "" {
		u, err := url.Parse(o.TUFURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file") || (u.Scheme != "file" && u.Host == "") {
			return "", nil, usageErrorf("trusted-root: --tuf-url %q: give an https://, http:// or file:// URL of a TUF repository", o.TUFURL)
		}
		repo = strings.TrimSuffix(o.TUFURL, "/")
		if d := tuf.URLToPath(repo); d == "" || d == "." || d == ".." || strings.ContainsAny(d, `\`) {
			return "", nil, usageErrorf("trusted-root: --tuf-url %q: give the URL of a TUF repository (it also names the repository's cache directory)", o.TUFURL)
		}
	}
	if o.TUFRoot != "" {
		if tufRoot, err = readTUFRoot(o.TUFRoot); err != nil {
			return "", nil, err
		}
	}
	return repo, tufRoot, nil
}

func runTrustedRoot(ctx context.Context, o *trustedRootOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	repo, tufRoot, err := o.source()
	if err != nil {
		return err
	}
	dir, err := cache.DefaultDir()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	data, err := fetchTrustedRoot(ctx, repo, tufRoot, filepath.Join(dir, "tuf"))
	if err != nil {
		return o.failed(tufError(ctx, repo, o.Timeout, err))
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return o.failed(&exitCodeError{code: exitRefused, msg: fmt.Sprintf("trusted-root: %s holds a %s that TUF vouches for, but it is not a trusted root: %v; nothing was written", repo, trustedRootTarget, err)})
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return o.failed(&exitCodeError{code: exitRefused, msg: fmt.Sprintf("trusted-root: the trusted root from %s lists no certificate authority: it cannot vouch for a keyless signature; nothing was written", repo)})
	}
	if err := scratch.WriteFileAtomic(o.Out, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return o.failed(fmt.Errorf("trusted-root: writing %s: %w", o.Out, err))
	}
	sum := summarizeTrustedRoot(tr)
	sum.File, sum.Repository = o.Out, repo
	if o.output.JSON() {
		return writeJSON(o.io.Out, sum)
	}
	writeTrustedRootText(o.io.Out, sum)
	return nil
}

// writeTrustedRootText says where the trusted root went and what it holds.
func writeTrustedRootText(w io.Writer, sum *trustSummary) {
	fmt.Fprintf(w, "Wrote %s, the trusted root from %s (checked through TUF)\n", sum.File, sum.Repository)
	for _, g := range []struct {
		title string
		list  []trustEntry
	}{
		{"certificate authorities", sum.CAs},
		{"timestamp authorities", sum.TSAs},
		{"transparency logs", sum.Logs},
		{"certificate transparency logs", sum.CTLogs},
	} {
		fmt.Fprintf(w, "  %s: %d\n", g.title, len(g.list))
		for _, e := range g.list {
			fmt.Fprintf(w, "    %s  %s\n", printableText(e.URI), e.validity())
		}
	}
}

// failed answers a failure; with -o json, {"written": false, ...} on stdout too.
func (o *trustedRootOptions) failed(err error) error {
	if !o.output.JSON() {
		return err
	}
	writeJSON(o.io.Out, struct {
		Written  bool   `json:"written"`
		Reason   string `json:"reason"`
		ExitCode int    `json:"exit_code"`
	}{false, err.Error(), exitCodeOf(err)})
	return &answeredError{err}
}

// exitCodeOf is exitCode, reading an exitCodeError's own code first.
func exitCodeOf(err error) int {
	var ce *exitCodeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitCode(err)
}

// readTUFRoot reads --tuf-root and checks it is a TUF root signed by its own keys.
func readTUFRoot(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("trusted-root: --tuf-root: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTUFRootSize+1))
	if err != nil {
		return nil, usageErrorf("trusted-root: --tuf-root %s: %v", path, err)
	}
	if len(data) > maxTUFRootSize {
		return nil, usageErrorf("trusted-root: --tuf-root %s is over %d KiB: it is not a TUF root.json", path, maxTUFRootSize>>10)
	}
	r, err := metadata.Root().FromBytes(data)
	if err != nil {
		return nil, usageErrorf("trusted-root: --tuf-root %s is not a TUF root.json (%v): give the root.json of the repository --tuf-url names", path, err)
	}
	if err := r.VerifyDelegate(metadata.ROOT, r); err != nil {
		return nil, usageErrorf("trusted-root: --tuf-root %s is not signed by its own root keys (%v): get the repository's root.json again", path, err)
	}
	return data, nil
}

// fetchTrustedRoot runs a TUF update against repo, trusting tufRoot (or the newer roots it
// signs), keeping metadata in cacheDir, and returns the trusted root target's bytes.
func fetchTrustedRoot(ctx context.Context, repo string, tufRoot []byte, cacheDir string) ([]byte, error) {
	opts := tuf.DefaultOptions()
	opts.Root = tufRoot
	opts.RepositoryBaseURL = repo
	opts.CachePath = cacheDir
	opts.CacheValidity = tuf.NoCache
	opts.Context = ctx
	f := fetcher.NewDefaultFetcher()
	f.SetHTTPUserAgent("oprov/" + currentVersion().Version)
	f.SetHTTPClient(&http.Client{Transport: tufTransport(ctx)})
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
		data, err := c.GetTarget(trustedRootTarget)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// tufTransport is HTTP(S) as usual, bound to ctx, plus file:// for a mirror on disk.
func tufTransport(ctx context.Context) http.RoundTripper {
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
// before downloading it.
type boundedFetcher struct{ f fetcher.Fetcher }

func (b boundedFetcher) DownloadFile(u string, maxLength int64, timeout time.Duration) ([]byte, error) {
	if strings.HasSuffix(u, trustedRootTarget) && maxLength > maxTrustedRootSize {
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

// tufError says why a TUF update failed, classed for the exit code: the repository could not be
// reached (3), or what it served was refused (10).
func tufError(ctx context.Context, repo string, timeout time.Duration, err error) error {
	var ot *oversizedTarget
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &exitCodeError{code: exitUnreachable, msg: fmt.Sprintf("trusted-root: %s did not answer within %s (--timeout); nothing was written", repo, timeout)}
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &ot), errors.Is(err, &metadata.ErrRepository{}), errors.Is(err, &metadata.ErrDownloadLengthMismatch{}):
		return &exitCodeError{code: exitRefused, msg: fmt.Sprintf("trusted-root: refused what %s served: %v; nothing was written (the mirror may be stale or tampered with; with --tuf-root, check it is this repository's root.json)", repo, err)}
	case errors.Is(err, &metadata.ErrDownloadHTTP{}), errors.As(err, &ue), errors.As(err, &ne):
		return &exitCodeError{code: exitUnreachable, msg: fmt.Sprintf("trusted-root: could not fetch from %s: %v; nothing was written (check --tuf-url and the network)", repo, err)}
	}
	return fmt.Errorf("trusted-root: %s: %w; nothing was written", repo, err)
}

// printableText is s as it may reach a terminal: itself when every character is printable, else
// quoted, so that a trusted root's URIs cannot send control sequences to the user's terminal.
func printableText(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// trustSummary is what a trusted root holds, as trusted-root prints it.
type trustSummary struct {
	File       string       `json:"file"`
	Repository string       `json:"repository"`
	CAs        []trustEntry `json:"certificate_authorities"`
	TSAs       []trustEntry `json:"timestamp_authorities"`
	Logs       []trustEntry `json:"transparency_logs"`
	CTLogs     []trustEntry `json:"ct_logs"`
}

type trustEntry struct {
	URI   string     `json:"uri"`
	Start *time.Time `json:"valid_from,omitempty"`
	End   *time.Time `json:"valid_until,omitempty"`
}

func (e trustEntry) validity() string {
	from, until := "always", "now"
	if e.Start != nil {
		from = e.Start.Format(time.DateOnly)
	}
	if e.End != nil {
		until = e.End.Format(time.DateOnly)
	}
	return "valid " + from + " to " + until
}

func newTrustEntry(uri string, start, end time.Time) trustEntry {
	e := trustEntry{URI: uri}
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

func summarizeTrustedRoot(tr *root.TrustedRoot) *trustSummary {
	s := &trustSummary{CAs: []trustEntry{}, TSAs: []trustEntry{}}
	for _, ca := range tr.FulcioCertificateAuthorities() {
		if f, ok := ca.(*root.FulcioCertificateAuthority); ok {
			s.CAs = append(s.CAs, newTrustEntry(f.URI, f.ValidityPeriodStart, f.ValidityPeriodEnd))
		}
	}
	for _, ta := range tr.TimestampingAuthorities() {
		if t, ok := ta.(*root.SigstoreTimestampingAuthority); ok {
			s.TSAs = append(s.TSAs, newTrustEntry(t.URI, t.ValidityPeriodStart, t.ValidityPeriodEnd))
		}
	}
	s.Logs, s.CTLogs = logEntries(tr.RekorLogs()), logEntries(tr.CTLogs())
	return s
}

func logEntries(logs map[string]*root.TransparencyLog) []trustEntry {
	out := []trustEntry{}
	for _, l := range logs {
		out = append(out, newTrustEntry(l.BaseURL, l.ValidityPeriodStart, l.ValidityPeriodEnd))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].URI != out[j].URI {
			return out[i].URI < out[j].URI
		}
		return out[i].Start != nil && (out[j].Start == nil || out[i].Start.Before(*out[j].Start))
	})
	return out
}
