package serve

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

var testPlatforms = []manifest.Platform{{OS: "linux", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}, {OS: "windows", Arch: "amd64"}}

// layoutFixture is an OCI layout holding example.com/acme/hello in several versions, some signed
// with a key pair of the test process's (internal/testfix builds it).
type layoutFixture struct {
	dir    string // the layout
	pubKey string
	hashes map[string]map[manifest.Platform]pkghash.Hashes // by version
	index  map[string]string                               // index digest by version
}

// newLayout pushes one release per version (signed when signed[version]) into a fresh layout.
func newLayout(t *testing.T, signed map[string]bool) *layoutFixture {
	t.Helper()
	f := &layoutFixture{dir: filepath.Join(t.TempDir(), "layout"), hashes: map[string]map[manifest.Platform]pkghash.Hashes{}, index: map[string]string{}}
	key := testfix.SharedKey(t, 0)
	f.pubKey = key.PubPath
	repo := testfix.Layout(t, f.dir)
	for version, sig := range signed {
		rel := testfix.NewRelease(t, "hello", version, testPlatforms...)
		f.hashes[version] = rel.Hashes
		signer := key
		if !sig {
			signer = nil
		}
		f.index[version] = repo.PushSigned(t, rel, signer).Digest.String()
	}
	return f
}

// testServer is a server over a layout fixture, with its log captured.
type testServer struct {
	*Server
	cache *cache.Cache
	log   *syncBuffer
	h     http.Handler
}

func (f *layoutFixture) server(t *testing.T, policy *sign.Policy, refresh time.Duration) *testServer {
	t.Helper()
	tmpl, err := ParseTemplate(oci.LayoutScheme+f.dir, "example.com/acme/hello")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	buf := &syncBuffer{}
	s, err := New(Config{Template: tmpl, Policy: policy, Cache: c, Refresh: refresh, RegistryConcurrency: 4, Log: slog.New(slog.NewJSONHandler(buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: s, cache: c, log: buf, h: s.Handler()}
}

// keyPolicy enforces the fixture's key, as --key does.
func (f *layoutFixture) keyPolicy(t *testing.T) *sign.Policy {
	t.Helper()
	pk, err := sign.LoadPublicKey(f.pubKey)
	if err != nil {
		t.Fatal(err)
	}
	rule := &sign.Rule{Name: "test", Mode: sign.ModeEnforce, Providers: []string{"*/*/*"}, Keys: []sign.PublicKey{pk}}
	return &sign.Policy{Path: "test", Mode: sign.ModeEnforce, Rules: []*sign.Rule{rule}}
}

// do answers one GET request.
func (s *testServer) do(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// get answers one GET request and gives the status and body.
func (s *testServer) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.Bytes()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// logLines gives the log lines that mention s.
func (b *syncBuffer) logLines(s string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

func digestOf(hexSum string) digest.Digest { return digest.NewDigestFromEncoded(digest.SHA256, hexSum) }
