// Package refreg runs a registry with the native OCI 1.1 referrers API for tests:
// go-containerregistry's pkg/registry with referrers enabled, over TLS on 127.0.0.1, behind a
// small handler that does what zot and Harbor do and that registry does not (format.md §7): it
// answers a manifest PUT that has a subject with the OCI-Subject header, so clients use the API
// instead of the referrers-tag fallback. The handler also reads each request body whole before
// passing it on: that registry reads bodies under a lock, which parallel HTTP/2 uploads can
// deadlock against.
package refreg

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/oprov/oprov/tests/testkit/testca"
)

// Registry is a running registry.
type Registry struct {
	Host   string // 127.0.0.1:PORT
	CAFile string

	mu       sync.Mutex
	subjects int // manifest PUTs answered with OCI-Subject
	apiGets  int // GETs of the referrers API
}

// Start starts a registry whose certificate ca issued, and stops it when the test ends.
func Start(t testing.TB, ca *testca.CA) *Registry {
	t.Helper()
	certFile, keyFile := ca.Issue(t, t.TempDir(), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{Host: ln.Addr().String(), CAFile: ca.File}
	inner := registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))
	srv := &http.Server{Handler: r.front(inner), ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}}))
	t.Cleanup(func() { srv.Close() })
	return r
}

// front buffers request bodies and adds OCI-Subject to manifest PUTs that carry a subject.
func (r *Registry) front(inner http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(req.URL.Path, "/referrers/") {
			r.count(&r.apiGets)
		}
		if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/manifests/") {
			var m struct {
				Subject *struct {
					Digest string `json:"digest"`
				} `json:"subject"`
			}
			if json.Unmarshal(body, &m) == nil && m.Subject != nil {
				w.Header().Set("OCI-Subject", m.Subject.Digest)
				r.count(&r.subjects)
			}
		}
		inner.ServeHTTP(w, req)
	})
}

func (r *Registry) count(n *int) {
	r.mu.Lock()
	*n++
	r.mu.Unlock()
}

// SubjectPuts is how many manifests with a subject were pushed (each answered with OCI-Subject).
func (r *Registry) SubjectPuts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subjects
}

// ReferrersAPIGets is how many times the referrers API was asked.
func (r *Registry) ReferrersAPIGets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.apiGets
}

// Tags lists a repository's tags, for checking that no referrers-tag fallback was written.
func (r *Registry) Tags(t testing.TB, repo string) []string {
	t.Helper()
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + r.Host + "/v2/" + repo + "/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tl struct{ Tags []string }
	json.NewDecoder(resp.Body).Decode(&tl)
	return tl.Tags
}
