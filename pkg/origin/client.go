// Package origin reads origin provider registries over the Provider Registry Protocol v1
// (format.md §4): discovery, versions and download answers, with retries, API tokens found
// where OpenTofu finds them, and checks of the plugin protocols a version speaks. Its Source
// is such a registry as a source.Source, whose packages are authenticated by the OpenPGP
// signature over each release's SHA256SUMS (signedsums.go) with the origin's or pinned keys
// (keys.go).
package origin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/tfcreds"
)

// Client speaks one origin registry's Provider Registry Protocol v1 (format.md §4).
type Client struct {
	Host     string
	reg      *oci.Client // TLS policy, user agent and limits
	base     *url.URL    // the providers.v1 base
	client   *http.Client
	retry    retryPolicy
	answered sync.Map // hosts that answered in this run: a refusal from them may pass
	authHost string   // Host as credentials name it (see tfcreds.Normalize)
	token    *tfcreds.Token
	credsErr error // why the CLI configuration could not be read, if it could not
}

// Version is one version an origin offers.
type Version struct {
	Version   string              `json:"version"`
	Protocols []string            `json:"protocols"`
	Platforms []manifest.Platform `json:"platforms"`
}

// Download is what the origin says about one platform's package of a version.
type Download struct {
	Protocols           []string `json:"protocols"`
	OS                  string   `json:"os"`
	Arch                string   `json:"arch"`
	Filename            string   `json:"filename"`
	DownloadURL         string   `json:"download_url"`
	SHASumsURL          string   `json:"shasums_url"`
	SHASumsSignatureURL string   `json:"shasums_signature_url"`
	SHASum              string   `json:"shasum"`
	SigningKeys         struct {
		GPGPublicKeys []struct {
			KeyID      string `json:"key_id"`
			ASCIIArmor string `json:"ascii_armor"`
		} `json:"gpg_public_keys"`
	} `json:"signing_keys"`
	url *url.URL // where this answer came from; relative URLs resolve against it
}

// Resolve turns one of the answer's URLs into an absolute one.
func (d *Download) Resolve(ref string) (string, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("bad URL %q in the download answer: %w", ref, err)
	}
	return d.url.ResolveReference(u).String(), nil
}

// newClient discovers host's providers.v1 service (GET https://HOST/.well-known/terraform.json).
// TLS follows the registry client's policy (system roots, SSL_CERT_FILE, CAFile). The origin's API token,
// if the user has one, is found where OpenTofu finds it (TF_TOKEN_<host>, then credentials
// blocks of the CLI configuration: see pkg/tfcreds) and sent to the origin's own host only.
// Every GET is retried on failures that may pass (see get).
func newClient(ctx context.Context, host string, reg *oci.Client) (*Client, error) {
	tlsConfig, err := oci.TLSConfig(reg.CAFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	tr.ResponseHeaderTimeout = responseHeaderTimeout
	o := &Client{Host: host, reg: reg, retry: defaultRetry}
	o.authHost, _ = tfcreds.Normalize(host)
	o.token, o.credsErr = tfcreds.Lookup(host)
	var rt http.RoundTripper = tr
	if o.token != nil {
		rt = &bearerTransport{next: tr, host: o.authHost, token: o.token.Value}
	}
	o.client = &http.Client{Transport: rt, Timeout: 10 * time.Minute}
	disco := &url.URL{Scheme: "https", Host: host, Path: "/.well-known/terraform.json"}
	var doc map[string]any
	if err := o.getJSON(ctx, disco, &doc); err != nil {
		return nil, fmt.Errorf("discovering %s's provider registry: %w", host, err)
	}
	rel, ok := doc["providers.v1"].(string)
	if !ok {
		return nil, fmt.Errorf("%s offers no providers.v1 service (its .well-known/terraform.json has no providers.v1)", host)
	}
	ref, err := url.Parse(rel)
	if err != nil {
		return nil, fmt.Errorf("%s: providers.v1 %q is not a URL", host, rel)
	}
	o.base = disco.ResolveReference(ref)
	if !strings.HasSuffix(o.base.Path, "/") {
		o.base.Path += "/"
	}
	return o, nil
}

// maxJSON bounds an answer of the protocol's JSON API.
const maxJSON = 16 << 20

func (o *Client) getJSON(ctx context.Context, u *url.URL, v any) error {
	var data []byte
	err := o.get(ctx, u, func(body io.Reader, _ int64) (int64, error) {
		var err error
		data, err = io.ReadAll(io.LimitReader(body, maxJSON+1))
		return 0, err // nothing is passed on until the whole answer is in
	})
	if err != nil {
		return err
	}
	if len(data) > maxJSON {
		return fmt.Errorf("GET %s: the answer is larger than %d bytes", u, maxJSON)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("GET %s: the answer is not valid JSON: %w", u, err)
	}
	return nil
}

// get GETs u and hands the body of a 200 answer, and its size (-1 when not known), to read, which
// says how many bytes it passed on.
// A failure that may pass (429, most 5xx, a reset, cut or timed-out connection, a refusal by a
// host that answered before) is tried again after a backoff, or after what Retry-After asks, as
// far as o.retry allows; but not once read has passed bytes on, which cannot be taken back.
func (o *Client) get(ctx context.Context, u *url.URL, read func(body io.Reader, size int64) (int64, error)) error {
	return o.retry.retrying(ctx, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return err
		}
		o.reg.SetUserAgent(req)
		resp, err := o.client.Do(req)
		if err != nil {
			_, before := o.answered.Load(u.Host)
			if transientNetError(ctx, err, before) {
				return &transientError{err: explainHTTP(u, err)}
			}
			return explainHTTP(u, err)
		}
		defer resp.Body.Close()
		o.answered.Store(u.Host, true)
		if resp.StatusCode != http.StatusOK {
			return o.statusError(u, resp)
		}
		body := &netReader{r: resp.Body}
		n, err := read(body, resp.ContentLength)
		if err != nil && body.err != nil && n == 0 && transientNetError(ctx, body.err, true) {
			return &transientError{err: fmt.Errorf("GET %s: reading the answer: %w", u, body.err)}
		}
		return err
	})
}

// statusError explains an answer other than 200, marking those worth another try.
func (o *Client) statusError(u *url.URL, resp *http.Response) error {
	err := fmt.Errorf("GET %s: %s", u, resp.Status)
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return o.authError(err, resp.Request.URL.Host)
	}
	if retryableStatus(resp.StatusCode) {
		after, ok := retryAfter(resp.Header, time.Now())
		return &transientError{err: err, after: after, hasAfter: ok}
	}
	return err
}

func explainHTTP(u *url.URL, err error) error {
	const fix = "check the host in the provider address; where there is no network, mirror on a connected machine and carry the result over with 'oprov save' and 'oprov load'"
	var (
		dnsErr *net.DNSError
		ne     net.Error
		why    string
	)
	switch {
	case strings.Contains(err.Error(), "certificate"):
		return oci.WithRemedy(fmt.Errorf("GET %s: %w", u, err), oci.RemedyTrustCA, u.Host)
	case errors.Is(err, syscall.ECONNREFUSED):
		why = fmt.Sprintf("cannot reach the origin %s: connection refused", u.Host)
	case errors.As(err, &dnsErr):
		why = fmt.Sprintf("cannot resolve the origin's host %s", u.Hostname())
	case errors.As(err, &ne) && ne.Timeout():
		why = fmt.Sprintf("cannot reach the origin %s: timed out", u.Host)
	default:
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return &explainedError{msg: fmt.Sprintf("%s (GET %s); %s", why, u, fix), err: err}
}

// explainedError is a message that names the cause and the fix, over the error it explains.
type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }

func (e *explainedError) Unwrap() error { return e.err }

// Versions lists the versions of NAMESPACE/TYPE the origin offers.
func (o *Client) Versions(ctx context.Context, namespace, typ string) ([]Version, error) {
	u := o.base.ResolveReference(&url.URL{Path: url.PathEscape(namespace) + "/" + url.PathEscape(typ) + "/versions"})
	var doc struct {
		Versions []struct {
			Version   string   `json:"version"`
			Protocols []string `json:"protocols"`
			Platforms []struct {
				OS   string `json:"os"`
				Arch string `json:"arch"`
			} `json:"platforms"`
		} `json:"versions"`
	}
	if err := o.getJSON(ctx, u, &doc); err != nil {
		return nil, err
	}
	var out []Version
	for _, v := range doc.Versions {
		ov := Version{Version: v.Version, Protocols: v.Protocols}
		for _, p := range v.Platforms {
			ov.Platforms = append(ov.Platforms, manifest.Platform{OS: p.OS, Arch: p.Arch})
		}
		out = append(out, ov)
	}
	return out, nil
}

// Download asks where a platform's package of a version is, and how it is signed.
func (o *Client) Download(ctx context.Context, namespace, typ, version string, p manifest.Platform) (*Download, error) {
	u := o.base.ResolveReference(&url.URL{Path: strings.Join([]string{url.PathEscape(namespace), url.PathEscape(typ), url.PathEscape(version), "download", p.OS, p.Arch}, "/")})
	d := &Download{url: u}
	if err := o.getJSON(ctx, u, d); err != nil {
		return nil, err
	}
	if d.OS != p.OS || d.Arch != p.Arch {
		return nil, fmt.Errorf("GET %s: the answer is for %s_%s, not %s", u, d.OS, d.Arch, p)
	}
	if d.DownloadURL == "" || d.SHASumsURL == "" || d.SHASumsSignatureURL == "" {
		return nil, fmt.Errorf("GET %s: the answer lacks download_url, shasums_url or shasums_signature_url", u)
	}
	return d, nil
}

// sizeExpecter is a writer that wants to know how many bytes are coming, such as a progress
// display (Fetch tells it the answer's Content-Length, when there is one).
type sizeExpecter interface{ ExpectSize(n int64) }

// Fetch streams a URL's body into w, at most max bytes. Failures before the first byte reaches w
// are retried like every GET; after that the error is returned, so w never gets a byte twice.
func (o *Client) Fetch(ctx context.Context, rawURL string, w io.Writer, max int64) (int64, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", rawURL, err)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && (oci.Ref{Registry: u.Host}).IsLoopback()) {
		return 0, fmt.Errorf("GET %s: only https URLs are fetched", rawURL)
	}
	var n int64
	err = o.get(ctx, u, func(body io.Reader, size int64) (int64, error) {
		if e, ok := w.(sizeExpecter); ok && size >= 0 {
			e.ExpectSize(size)
		}
		cw := &iox.CountingWriter{W: w}
		_, err := io.Copy(cw, io.LimitReader(body, max+1))
		n = cw.N
		if err != nil {
			return cw.N, fmt.Errorf("GET %s: %w", rawURL, err)
		}
		return cw.N, nil
	})
	if err != nil {
		return n, err
	}
	if n > max {
		return n, fmt.Errorf("GET %s: more than %d bytes", rawURL, max)
	}
	return n, nil
}
