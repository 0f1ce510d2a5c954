package module

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/tfcreds"
)

// maxJSON bounds an answer of the Module Registry Protocol.
const maxJSON = 4 << 20

// client is the HTTP client of the walk: TLS as oci.Options gives it (system roots, CAFile),
// bounded waits for an answer, and a registry's API token (found where OpenTofu finds it) sent to
// that registry's own host over https only.
func (w *walker) client() (*http.Client, error) {
	if w.opts.HTTP != nil {
		return w.opts.HTTP, nil
	}
	tlsConfig, err := oci.TLSConfig(w.opts.CAFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConfig
	tr.ResponseHeaderTimeout = time.Minute
	w.opts.HTTP = &http.Client{Transport: &tokenTransport{next: tr}, Timeout: 10 * time.Minute}
	return w.opts.HTTP, nil
}

// tokenTransport adds the API token the CLI configuration or TF_TOKEN_* holds for a request's own
// host, over https.
type tokenTransport struct{ next http.RoundTripper }

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "https" && req.Header.Get("Authorization") == "" {
		if tok, err := tfcreds.Lookup(req.URL.Host); err == nil && tok != nil {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+tok.Value)
		}
	}
	return t.next.RoundTrip(req)
}

// get GETs u and gives the answer with its body read, at most max bytes.
func (w *walker) get(ctx context.Context, u *url.URL, max int64) (*http.Response, []byte, error) {
	return w.getProgress(ctx, u, max, nil)
}

// progressReader tells a Progress of the bytes read through it.
type progressReader struct {
	r       io.Reader
	p       oci.Progress
	unsized bool // no Content-Length: each read is planned as it arrives
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	if pr.unsized {
		pr.p.Plan(int64(n))
	}
	pr.p.Advance(int64(n))
	return n, err
}

// getProgress is get that reports the body's bytes to p (when set) as they arrive.
func (w *walker) getProgress(ctx context.Context, u *url.URL, max int64, p oci.Progress) (*http.Response, []byte, error) {
	c, err := w.client()
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > max {
		return nil, nil, fmt.Errorf("GET %s: the answer is %d bytes, over the limit of %d", u.Redacted(), resp.ContentLength, max)
	}
	var rd io.Reader = resp.Body
	if p != nil && resp.StatusCode == http.StatusOK {
		if resp.ContentLength > 0 {
			p.Plan(resp.ContentLength)
		}
		rd = &progressReader{r: rd, p: p, unsized: resp.ContentLength < 0}
	}
	body, err := io.ReadAll(io.LimitReader(rd, max+1))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	if int64(len(body)) > max {
		return nil, nil, fmt.Errorf("GET %s: the answer is over the limit of %d bytes", u.Redacted(), max)
	}
	return resp, body, nil
}

// getJSON GETs u and decodes a 200 answer into v.
func (w *walker) getJSON(ctx context.Context, u *url.URL, v any) error {
	resp, body, err := w.get(ctx, u, maxJSON)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: the answer is not the JSON the protocol gives: %w", u.Redacted(), err)
	}
	return nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
