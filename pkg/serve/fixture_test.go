package serve

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/release"
	"github.com/oprov/oprov/pkg/sign"
)

var testPlatforms = []manifest.Platform{{OS: "linux", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}, {OS: "windows", Arch: "amd64"}}

// layoutFixture is an OCI layout holding example.com/acme/hello in several versions, some signed
// with a key pair of the fixture's own.
type layoutFixture struct {
	dir    string // the layout
	pubKey string
	hashes map[string]map[manifest.Platform]release.Hashes // by version
	index  map[string]string                               // index digest by version
}

func password(bool) ([]byte, error) { return []byte("test"), nil }

// newLayout pushes one release per version (signed when signed[version]) into a fresh layout.
func newLayout(t *testing.T, signed map[string]bool) *layoutFixture {
	t.Helper()
	ctx := context.Background()
	work := t.TempDir()
	f := &layoutFixture{dir: filepath.Join(work, "layout"), hashes: map[string]map[manifest.Platform]release.Hashes{}, index: map[string]string{}}
	key, pub, err := sign.GenerateKeyPair(filepath.Join(work, "cosign"), password)
	if err != nil {
		t.Fatal(err)
	}
	f.pubKey = pub
	signer, err := sign.LoadSigner(key, password)
	if err != nil {
		t.Fatal(err)
	}
	ref := oci.Ref{Layout: f.dir}
	target, err := oci.Open(ctx, ref, oci.Options{}, true)
	if err != nil {
		t.Fatal(err)
	}
	for version, sig := range signed {
		pkg, err := release.PackageBinaries(fakeBinaries(t, version), release.PackageOptions{
			Version: version, Type: "hello", Platforms: testPlatforms, OutDir: filepath.Join(work, "dist-"+version),
		})
		if err != nil {
			t.Fatal(err)
		}
		f.hashes[version] = pkg.Hashes
		tag, _ := manifest.VersionToTag(version)
		res, err := artifact.PushRelease(ctx, target, pkg.Release, tag, artifact.PushOptions{Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		f.index[version] = res.Index.Digest.String()
		if sig {
			if _, err := sign.Sign(ctx, target, ref.WithReference(tag), res.Index, signer, sign.SignOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// fakeBinaries lays out DIR/OS_ARCH/terraform-provider-hello, a script naming its platform and
// version, so each version's zips differ.
func fakeBinaries(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range testPlatforms {
		name := "terraform-provider-hello"
		if p.OS == "windows" {
			name += ".exe"
		}
		path := filepath.Join(dir, p.String(), name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho "+p.String()+" "+version+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
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
