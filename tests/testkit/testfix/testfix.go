// Package testfix builds, in process, what the core's tests install from: provider releases made
// of real deterministic zips (pkg/providerrelease), pushed as OpenTofu's OCI artifact by the project's own
// artifact.PushRelease into an OCI layout directory or an in-process registry, and signed with
// cosign key pairs through pkg/sign. The loader's and pkg/source's tests share it, so that no
// peer (registry, cosign, tofu) has to be installed for them.
package testfix

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/sign"
)

// Host is this machine's platform.
func Host() manifest.Platform {
	return manifest.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// Platforms are the platforms a fixture release has packages for: four, this machine's among them.
func Platforms() []manifest.Platform {
	ps := []manifest.Platform{{OS: "darwin", Arch: "arm64"}, {OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}, {OS: "windows", Arch: "amd64"}}
	if !slices.Contains(ps, Host()) {
		ps[0] = Host()
	}
	return ps
}

// Addr parses a provider address, failing the test on a bad one.
func Addr(t testing.TB, s string) manifest.ProviderAddress {
	t.Helper()
	a, err := manifest.ParseProviderAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Cache opens an empty cache in a temporary directory, closed when the test ends.
func Cache(t testing.TB) *cache.Cache {
	t.Helper()
	c, err := cache.Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Reopen opens c's directory again, as the next command does: a new Cache that has checked
// nothing yet.
func Reopen(t testing.TB, c *cache.Cache) *cache.Cache {
	t.Helper()
	again, err := cache.Open(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	return again
}

// Release is one version of a provider, packaged: a zip per platform, each holding a small
// script named as the provider's executable that says which type, version and platform it is.
type Release struct {
	Type, Version string
	Release       *providerrelease.Release
	Hashes        map[manifest.Platform]pkghash.Hashes
}

// ExecutableContent is what the executable in a fixture package holds.
func ExecutableContent(typ, version string, p manifest.Platform) string {
	return "#!/bin/sh\necho terraform-provider-" + typ + " " + version + " " + p.String() + "\n"
}

// NewRelease packages version of provider type typ for platforms (Platforms() when none).
func NewRelease(t testing.TB, typ, version string, platforms ...manifest.Platform) *Release {
	t.Helper()
	return newRelease(t, typ, version, "", platforms)
}

// Republished packages the same version again with other bytes in every zip: what a release
// republished under a moved tag looks like.
func (r *Release) Republished(t testing.TB) *Release {
	t.Helper()
	var ps []manifest.Platform
	for _, a := range r.Release.Artifacts {
		ps = append(ps, a.Name.Platform)
	}
	return newRelease(t, r.Type, r.Version, "# republished\n", ps)
}

func newRelease(t testing.TB, typ, version, extra string, platforms []manifest.Platform) *Release {
	t.Helper()
	if len(platforms) == 0 {
		platforms = Platforms()
	}
	bin := t.TempDir()
	for _, p := range platforms {
		name := providerrelease.ExecutableName(typ, version, p.OS)
		path := filepath.Join(bin, p.String(), name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(ExecutableContent(typ, version, p)+extra), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pkg, err := providerrelease.PackageBinaries(bin, providerrelease.PackageOptions{Version: version, Type: typ, Platforms: platforms, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &Release{Type: typ, Version: version, Release: pkg.Release, Hashes: pkg.Hashes}
}

// Zip is the digest of a platform's zip (the lock file's zh: hash, as a digest).
func (r *Release) Zip(p manifest.Platform) digest.Digest {
	for _, a := range r.Release.Artifacts {
		if a.Name.Platform == p {
			return a.Digest
		}
	}
	panic("testfix: release " + r.Version + " has no package for " + p.String())
}

// ZipPath is where a platform's zip was written.
func (r *Release) ZipPath(p manifest.Platform) string {
	for _, a := range r.Release.Artifacts {
		if a.Name.Platform == p {
			return a.Path
		}
	}
	panic("testfix: release " + r.Version + " has no package for " + p.String())
}

// H1 is a platform's h1: hash.
func (r *Release) H1(p manifest.Platform) string { return r.Hashes[p].H1 }

// ZH is a platform's zh: hash.
func (r *Release) ZH(p manifest.Platform) string { return r.Hashes[p].ZH }

// LockHashes are every platform's h1: and zh: hashes, sorted, as a lock file records them.
func (r *Release) LockHashes() []string {
	var out []string
	for _, h := range r.Hashes {
		out = append(out, h.H1, h.ZH)
	}
	slices.Sort(out)
	return out
}

// LieAboutH1 makes the index pushed from now on record h1 as platform p's dev.oprov.h1
// annotation, whatever its zip holds: an index that does not describe its own package.
func (r *Release) LieAboutH1(p manifest.Platform, h1 string) {
	for i, a := range r.Release.Artifacts {
		if a.Name.Platform == p {
			r.Release.Artifacts[i].H1 = h1
		}
	}
}

// Key is a cosign key pair made for a test.
type Key struct {
	PubPath string // cosign.pub, PEM
	Public  sign.PublicKey
	signer  *sign.Signer
	pem     []byte
}

func password(bool) ([]byte, error) { return []byte("testfix"), nil }

// NewKey makes a key pair in a temporary directory.
func NewKey(t testing.TB) *Key {
	t.Helper()
	priv, pub, err := sign.GenerateKeyPair(filepath.Join(t.TempDir(), "cosign"), password)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(priv, password)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{PubPath: pub, Public: pk, signer: s, pem: pem}
}

var shared struct {
	sync.Mutex
	keys map[int]*Key
}

// SharedKey is the n-th key pair of the test process: made once (an encrypted key takes half a
// second to make and open) and kept in memory, its public key written into the asking test's
// own directory.
func SharedKey(t testing.TB, n int) *Key {
	t.Helper()
	shared.Lock()
	k := shared.keys[n]
	if k == nil {
		k = NewKey(t)
		if shared.keys == nil {
			shared.keys = map[int]*Key{}
		}
		shared.keys[n] = k
	}
	shared.Unlock()
	pub := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(pub, k.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	return &Key{PubPath: pub, Public: k.Public, signer: k.signer, pem: k.pem}
}

// Policy is a policy that trusts the keys for every provider, in mode (sign.ModeEnforce or
// sign.ModeWarn), as an oci_mirror block's public_keys or --key make.
func Policy(mode string, keys ...*Key) *sign.Policy {
	rule := &sign.Rule{Name: "testfix", Mode: mode, Providers: []string{"*/*/*"}}
	for _, k := range keys {
		rule.Keys = append(rule.Keys, k.Public)
	}
	return &sign.Policy{Path: "testfix.hcl", Mode: mode, Rules: []*sign.Rule{rule}}
}

// Repo is one repository (a provider's) to push fixtures into.
type Repo struct {
	Ref    oci.Ref // the repository, with no tag
	Target oci.Target
}

// Layout makes (or opens) an OCI layout directory as a repository.
func Layout(t testing.TB, dir string) *Repo {
	t.Helper()
	ref := oci.Ref{Layout: dir}
	tg, err := oci.NewClient(oci.Options{}).Open(context.Background(), ref, true)
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{Ref: ref, Target: tg}
}

// Push publishes a release under its version's tag, and gives the index's descriptor.
func (r *Repo) Push(t testing.TB, rel *Release) ocispec.Descriptor {
	t.Helper()
	tag, err := manifest.VersionToTag(rel.Version)
	if err != nil {
		t.Fatal(err)
	}
	res, err := artifact.PushRelease(context.Background(), r.Target, rel.Release, tag, artifact.PushOptions{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	return res.Index
}

// Sign signs the index a version's tag names with key, in cosign's bundle form.
func (r *Repo) Sign(t testing.TB, idx ocispec.Descriptor, version string, key *Key) {
	t.Helper()
	tag, _ := manifest.VersionToTag(version)
	if _, err := sign.Sign(context.Background(), r.Target, r.Ref.WithReference(tag), idx, key.signer, sign.SignOptions{}); err != nil {
		t.Fatal(err)
	}
}

// PushSigned pushes a release and, when key is not nil, signs it.
func (r *Repo) PushSigned(t testing.TB, rel *Release, key *Key) ocispec.Descriptor {
	t.Helper()
	idx := r.Push(t, rel)
	if key != nil {
		r.Sign(t, idx, rel.Version, key)
	}
	return idx
}

// Tag points another tag (one that is no version, say) at content already in the repository.
func (r *Repo) Tag(t testing.TB, desc ocispec.Descriptor, tag string) {
	t.Helper()
	if _, err := oras.Tag(context.Background(), r.Target, desc.Digest.String(), tag); err != nil {
		t.Fatal(err)
	}
}

// Registry is an OCI registry served in process (go-containerregistry's, over plain HTTP on
// 127.0.0.1) that counts the requests it answers.
type Registry struct {
	Host     string // 127.0.0.1:PORT
	Options  oci.Options
	requests atomic.Int64
	down     atomic.Bool
	mu       sync.Mutex
	paths    []string
}

// StartRegistry starts a registry, stopped when the test ends.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	g := &Registry{}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		g.requests.Add(1)
		if g.down.Load() {
			http.Error(w, "down for the test", http.StatusForbidden) // not retried, unlike 503
			return
		}
		g.mu.Lock()
		g.paths = append(g.paths, req.Method+" "+req.URL.Path)
		g.mu.Unlock()
		// That registry reads bodies under its lock: hand it the body whole.
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	g.Host = strings.TrimPrefix(srv.URL, "http://")
	// No credentials of the user's are read: the store is an empty file of the test's own.
	g.Options = oci.Options{PlainHTTP: true, RegistryConfig: filepath.Join(t.TempDir(), "config.json")}
	return g
}

// SetDown makes the registry answer every request with 503 (down) or serve again: for checks
// that must work offline.
func (g *Registry) SetDown(down bool) { g.down.Store(down) }

// Repo opens a repository of the registry (path like providers/acme/hello).
func (g *Registry) Repo(t testing.TB, path string) *Repo {
	t.Helper()
	ref := oci.Ref{Registry: g.Host, Repository: path}
	tg, err := oci.NewClient(g.Options).Open(context.Background(), ref, true)
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{Ref: ref, Target: tg}
}

// Requests is how many requests the registry has answered.
func (g *Registry) Requests() int64 { return g.requests.Load() }

// RequestsSince lists the requests answered after the first n (method and path), for messages.
func (g *Registry) RequestsSince(n int64) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if int(n) > len(g.paths) {
		return nil
	}
	return slices.Clone(g.paths[n:])
}

// FilesWithDigest lists the regular files under root whose sha256 is d: where a zip ended up,
// found by its content, whatever layout a cache keeps.
func FilesWithDigest(t testing.TB, root string, d digest.Digest) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) == d.Encoded() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Overwrite replaces a file's content, whatever its mode (cached zips are read-only).
func Overwrite(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// GoModule writes a tiny Go provider module (it only prints its version) into dir.
func GoModule(t testing.TB, dir, typ string) {
	t.Helper()
	files := map[string]string{
		"go.mod":  "module example.com/terraform-provider-" + typ + "\n\ngo 1.21\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nvar version = \"dev\"\n\nfunc main() { fmt.Println(\"" + typ + "\", version) }\n",
	}
	for name, content := range files {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// WriteFiles writes files (name -> content) under dir.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
