// Package tagflip is a hostile registry front for tests: an HTTPS reverse proxy on 127.0.0.1 in
// front of a test registry that answers the first request for one tag's manifest with another
// manifest (named by digest), and every later request honestly. It reproduces a tag that moves
// between two requests of one client, which a client must survive by resolving a tag once and
// then working by digest.
package tagflip

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/testreg"
)

// Options configure a front.
type Options struct {
	// Upstream is the registry the front forwards to; it must serve TLS.
	Upstream *testreg.Registry
	// CA issues the front's certificate; pass the one the upstream was started with (through
	// testreg.Options.CA) so that clients trusting Upstream.CAFile trust the front too.
	CA *testreg.CA
	// Repository (such as providers/acme/hello), Tag (such as 1.0.0) and Substitute (a digest,
	// sha256:...) say which manifest request is answered with what.
	Repository, Tag, Substitute string
	// Lifetime bounds how long the front serves, whatever the test does (default 10 minutes).
	Lifetime time.Duration
}

// Front is a running front.
type Front struct {
	Host string // 127.0.0.1:PORT

	tagPath, subPath string
	srv              *http.Server

	mu          sync.Mutex
	armed       bool
	substituted int
	counts      map[string]int // "METHOD /path" -> requests
}

// Start starts a front, armed, and stops it when the test ends.
func Start(t testing.TB, o Options) *Front {
	t.Helper()
	if o.Upstream == nil || !o.Upstream.TLS || o.CA == nil {
		t.Fatal("tagflip: needs a TLS upstream registry and the CA that issued its certificate")
	}
	if o.Repository == "" || o.Tag == "" || o.Substitute == "" {
		t.Fatal("tagflip: needs a repository, a tag and a substitute digest")
	}
	if o.Lifetime == 0 {
		o.Lifetime = 10 * time.Minute
	}
	f := &Front{
		tagPath: "/v2/" + o.Repository + "/manifests/" + o.Tag,
		subPath: "/v2/" + o.Repository + "/manifests/" + o.Substitute,
		armed:   true,
		counts:  map[string]int{},
	}
	certFile, keyFile := o.CA.Issue(t, t.TempDir(), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse(o.Upstream.URL())
	if err != nil {
		t.Fatal(err)
	}
	transport := o.Upstream.Client(t).Transport.(*http.Transport)
	transport.ResponseHeaderTimeout = 30 * time.Second
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.URL.Path, pr.Out.URL.RawPath = f.route(pr.In.Method, pr.In.URL.Path), ""
		},
		Transport: transport,
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.Host = l.Addr().String()
	f.srv = &http.Server{
		Handler:           proxy,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       30 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Logf("tagflip: %v", err)
		}
	}()
	stop := time.AfterFunc(o.Lifetime, func() { f.srv.Close() })
	t.Cleanup(func() {
		stop.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if f.srv.Shutdown(ctx) != nil {
			f.srv.Close()
		}
		<-done
		transport.CloseIdleConnections()
	})
	return f
}

// route counts a request and gives the upstream path it is sent to: the substitute's for the
// first GET or HEAD of the tag's manifest since the front was armed, the request's own otherwise.
func (f *Front) route(method, path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[method+" "+path]++
	if f.armed && path == f.tagPath && (method == http.MethodGet || method == http.MethodHead) {
		f.armed = false
		f.substituted++
		return f.subPath
	}
	return path
}

// Reset re-arms the front (the next request for the tag's manifest gets the substitute again)
// and zeroes its counters.
func (f *Front) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = true
	f.substituted = 0
	f.counts = map[string]int{}
}

// Substituted tells how many requests were answered with the substitute since the last Reset
// (0 or 1).
func (f *Front) Substituted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.substituted
}

// Count tells how many requests for path (any method) arrived since the last Reset.
func (f *Front) Count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, c := range f.counts {
		if _, p, _ := strings.Cut(k, " "); p == path {
			n += c
		}
	}
	return n
}

// Counts gives a copy of the request counts since the last Reset, keyed by "METHOD /path".
func (f *Front) Counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.counts))
	for k, c := range f.counts {
		out[k] = c
	}
	return out
}

// TagPath is the path of the tag's manifest, /v2/REPO/manifests/TAG.
func (f *Front) TagPath() string { return f.tagPath }
