package source_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

// repoFixture is example.com/acme/hello in an in-process registry: 1.0.0 and 1.1.0 signed with
// key, 2.0.0 unsigned, 3.0.0 signed with another key; and a "latest" tag.
type repoFixture struct {
	reg   *testfix.Registry
	repo  *testfix.Repo
	key   *testfix.Key
	other *testfix.Key
	addr  manifest.ProviderAddress
	rels  map[string]*testfix.Release
	idx   map[string]ocispec.Descriptor
	cache *cache.Cache
}

func newRepoFixture(t *testing.T) *repoFixture {
	t.Helper()
	f := &repoFixture{reg: testfix.StartRegistry(t), key: testfix.SharedKey(t, 0), other: testfix.SharedKey(t, 1),
		addr: testfix.Addr(t, "example.com/acme/hello"), rels: map[string]*testfix.Release{}, idx: map[string]ocispec.Descriptor{}, cache: testfix.Cache(t)}
	f.repo = f.reg.Repo(t, "providers/acme/hello")
	for v, k := range map[string]*testfix.Key{"1.0.0": f.key, "1.1.0": f.key, "2.0.0": nil, "3.0.0": f.other} {
		f.rels[v] = testfix.NewRelease(t, "hello", v)
		f.idx[v] = f.repo.PushSigned(t, f.rels[v], k)
	}
	f.repo.Tag(t, f.idx["1.1.0"], "latest")
	return f
}

// env is a fresh command's environment over the fixture's cache, logging into log.
func (f *repoFixture) env(log *bytes.Buffer) *source.Env {
	e := &source.Env{Cache: f.cache, Registry: oci.NewClient(f.reg.Options)}
	if log != nil {
		e.Log = log
	}
	return e
}

func (f *repoFixture) source(env *source.Env, policy *sign.Policy) *source.OCI {
	return source.NewOCI(env, policy, func(manifest.ProviderAddress) (oci.Ref, error) { return f.repo.Ref, nil })
}

func v(s string) versions.Version { return versions.MustParseVersion(s) }

var linux = manifest.Platform{OS: "linux", Arch: "amd64"}

func TestOCIVersionsAndPlatforms(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	env := f.env(nil)
	src := f.source(env, nil)
	if env.Network.Load() {
		t.Fatal("opening a source touched the network")
	}
	list, err := src.AvailableVersions(ctx, f.addr)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range list {
		got = append(got, v.String())
	}
	slices.Sort(got)
	// "latest" and the signatures' tags are no versions.
	if want := []string{"1.0.0", "1.1.0", "2.0.0", "3.0.0"}; !slices.Equal(got, want) {
		t.Errorf("versions %v, want %v", got, want)
	}
	if !env.Network.Load() {
		t.Error("the source went to a registry without saying so")
	}
	ps, err := src.Platforms(ctx, f.addr, v("1.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	if !samePlatforms(ps, testfix.Platforms()) {
		t.Errorf("platforms %v, want %v", ps, testfix.Platforms())
	}
	if _, err := src.Platforms(ctx, f.addr, v("9.9.9")); err == nil {
		t.Error("a version the repository lacks has platforms")
	}
	if got := src.ForDisplay(f.addr); got != f.repo.Ref.Repo() {
		t.Errorf("ForDisplay = %q, want %q", got, f.repo.Ref.Repo())
	}
}

func TestOCIRepositoryErrors(t *testing.T) {
	ctx := context.Background()
	addr := testfix.Addr(t, "example.com/acme/hello")
	env := &source.Env{Cache: testfix.Cache(t)}
	bad := source.NewOCI(env, nil, func(manifest.ProviderAddress) (oci.Ref, error) { return oci.Ref{}, errTest })
	if _, err := bad.AvailableVersions(ctx, addr); err != errTest {
		t.Errorf("AvailableVersions: %v, want the template's error", err)
	}
	if _, err := bad.PackageFor(ctx, addr, v("1.0.0"), linux); err != errTest {
		t.Errorf("PackageFor: %v, want the template's error", err)
	}
	if got := bad.ForDisplay(addr); got != addr.String() {
		t.Errorf("ForDisplay = %q, want the address", got)
	}
	missing := t.TempDir() + "/nothing"
	src := source.NewOCI(env, nil, func(manifest.ProviderAddress) (oci.Ref, error) { return oci.Ref{Layout: missing}, nil })
	if _, err := src.AvailableVersions(ctx, addr); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing layout: %v", err)
	}
}

type testError struct{}

func (testError) Error() string { return "no repository for this provider" }

var errTest error = testError{}

func TestOCIPackageFor(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	rel := f.rels["1.1.0"]
	src := f.source(f.env(nil), nil)
	for _, p := range testfix.Platforms() {
		pkg, err := src.PackageFor(ctx, f.addr, v("1.1.0"), p)
		if err != nil {
			t.Fatal(err)
		}
		if pkg.Zip != rel.Zip(p) || pkg.H1 != rel.H1(p) || pkg.Size <= 0 || pkg.Version != "1.1.0" || pkg.Platform != p {
			t.Errorf("%s: package %+v, want zip %s and %s", p, pkg, rel.Zip(p), rel.H1(p))
		}
		if want := "terraform-provider-hello_1.1.0_" + p.String() + ".zip"; pkg.Filename != want {
			t.Errorf("filename %q, want %q", pkg.Filename, want)
		}
		if pkg.FromCache || pkg.Auth.Method != "none" || pkg.Auth.Subject != f.idx["1.1.0"].Digest {
			t.Errorf("%s: from cache %v, auth %+v", p, pkg.FromCache, pkg.Auth)
		}
		if got := fetch(t, pkg); got != pkg.Zip.Encoded() {
			t.Errorf("%s: fetched zip hashes to %s, want %s", p, got, pkg.Zip)
		}
	}
	_, err := src.PackageFor(ctx, f.addr, v("1.1.0"), manifest.Platform{OS: "plan9", Arch: "386"})
	if err == nil || !strings.Contains(err.Error(), "has no package for plan9_386") {
		t.Errorf("a platform the version lacks: %v", err)
	}

	// The next command answers from the cached metadata, asking the registry nothing; the zip
	// itself comes from the registry, by digest, when asked for.
	env := f.env(nil)
	next := f.source(env, nil)
	before := f.reg.Requests()
	pkg, err := next.PackageFor(ctx, f.addr, v("1.1.0"), linux)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.reg.Requests() - before; n != 0 || env.Network.Load() {
		t.Errorf("a cached version cost %d requests %v", n, f.reg.RequestsSince(before))
	}
	if !pkg.FromCache || pkg.Zip != rel.Zip(linux) || pkg.H1 != rel.H1(linux) || pkg.Auth.Method != "none" {
		t.Errorf("cached package: %+v", pkg)
	}
	if got := fetch(t, pkg); got != pkg.Zip.Encoded() {
		t.Errorf("the cached package's zip hashes to %s", got)
	}

	// WithoutCache goes to the registry.
	before = f.reg.Requests()
	pkg, err = f.source(f.env(nil), nil).PackageFor(source.WithoutCache(ctx), f.addr, v("1.1.0"), linux)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.FromCache || f.reg.Requests() == before {
		t.Errorf("WithoutCache answered from the cache (from cache %v, %d requests)", pkg.FromCache, f.reg.Requests()-before)
	}
}

// fetch streams a package's zip and gives its sha256.
func fetch(t *testing.T, pkg *cache.Package) string {
	t.Helper()
	var buf bytes.Buffer
	if err := pkg.Fetch(context.Background(), &buf, nil); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

func TestOCIPolicy(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	enforce := testfix.Policy(sign.ModeEnforce, f.key)
	src := f.source(f.env(nil), enforce)

	pkg, err := src.PackageFor(ctx, f.addr, v("1.0.0"), linux)
	if err != nil {
		t.Fatalf("a signed version: %v", err)
	}
	if a := pkg.Auth; a.Method != "cosign" || a.Subject != f.idx["1.0.0"].Digest || len(a.Keys) != 1 || a.Rule != "testfix" || a.Warning != "" {
		t.Errorf("authentication %+v", a)
	}
	for version, why := range map[string]string{"2.0.0": "unsigned", "3.0.0": "signed by another key"} {
		if _, err := src.PackageFor(ctx, f.addr, v(version), linux); err == nil {
			t.Errorf("%s (%s) passed an enforcing policy", version, why)
		} else if !strings.Contains(err.Error(), version) {
			t.Errorf("%s: the refusal does not name the version: %v", version, err)
		}
		if _, err := src.Platforms(ctx, f.addr, v(version)); err == nil {
			t.Errorf("%s (%s): Platforms answered under an enforcing policy", version, why)
		}
	}
	// A policy whose rules cover other providers only refuses in enforce mode.
	none := &sign.Policy{Path: "p.hcl", Mode: sign.ModeEnforce, Rules: []*sign.Rule{{Name: "other", Mode: sign.ModeEnforce, Providers: []string{"other.example/*/*"}, Keys: []sign.PublicKey{f.key.Public}}}}
	if _, err := f.source(f.env(nil), none).PackageFor(ctx, f.addr, v("1.0.0"), linux); err == nil || !strings.Contains(err.Error(), "no trust rule") {
		t.Errorf("no rule covers the provider: %v", err)
	}

	// Warn mode lets an unsigned version through, and says so.
	var log bytes.Buffer
	warn := f.source(f.env(&log), testfix.Policy(sign.ModeWarn, f.key))
	pkg, err = warn.PackageFor(ctx, f.addr, v("2.0.0"), linux)
	if err != nil {
		t.Fatalf("warn mode refused: %v", err)
	}
	if pkg.Auth.Warning == "" || pkg.Auth.Method != "none" {
		t.Errorf("warn mode: authentication %+v", pkg.Auth)
	}
	if !strings.Contains(log.String(), "warning") || !strings.Contains(log.String(), "2.0.0") {
		t.Errorf("warn mode logged %q", log.String())
	}
	// Once per version and command, however often it is asked for, from the registry or the cache.
	for _, ctx := range []context.Context{ctx, source.WithoutCache(ctx)} {
		for _, p := range testfix.Platforms() {
			if _, err := warn.PackageFor(ctx, f.addr, v("2.0.0"), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := strings.Count(log.String(), "warning"); n != 1 {
		t.Errorf("%d warnings about one version in one command:\n%s", n, log.String())
	}
}

// Cached metadata stands in for the registry only where it records a verification the policy
// would accept now.
func TestOCICachedMetadataUnderPolicy(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	enforce := testfix.Policy(sign.ModeEnforce, f.key)

	// Cached by a command with no policy, an unsigned version is still refused under one.
	if _, err := f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("2.0.0"), linux); err != nil {
		t.Fatal(err)
	}
	if _, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v("2.0.0"), linux); err == nil {
		t.Error("metadata cached without a policy let an unsigned version pass one")
	}
	// Versions cached with no policy are not taken as verified either.
	if _, err := f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("3.0.0"), linux); err != nil {
		t.Fatal(err)
	}
	if _, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v("3.0.0"), linux); err == nil {
		t.Error("a version signed by an untrusted key passed, from cached metadata")
	}

	// Verified once, a version is answered from the cache with no request, as verified.
	if _, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v("1.0.0"), linux); err != nil {
		t.Fatal(err)
	}
	before := f.reg.Requests()
	pkg, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v("1.0.0"), linux)
	if err != nil {
		t.Fatal(err)
	}
	if a := pkg.Auth; !pkg.FromCache || f.reg.Requests() != before || a.Method != "cosign" || a.Subject != f.idx["1.0.0"].Digest || len(a.Keys) != 1 || a.Rule != "testfix" {
		t.Errorf("verified and cached: from cache %v, %d requests, auth %+v", pkg.FromCache, f.reg.Requests()-before, a)
	}
	// With no policy now, an earlier verification is not reported as this command's.
	if pkg, err := f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("1.0.0"), linux); err != nil || !pkg.FromCache || pkg.Auth.Method != "none" {
		t.Errorf("no policy over verified metadata: %v %+v", err, pkg)
	}
	// ... but not under a policy that trusts another key: that one asks the registry, and refuses.
	before = f.reg.Requests()
	if _, err := f.source(f.env(nil), testfix.Policy(sign.ModeEnforce, f.other)).PackageFor(ctx, f.addr, v("1.0.0"), linux); err == nil {
		t.Error("a verification by one key stood in for another key's")
	}
	if f.reg.Requests() == before {
		t.Error("the other key's policy did not ask the registry")
	}
	// A warn-mode policy takes what the cache says, and warns each time about what it did not
	// verify.
	var log bytes.Buffer
	pkg, err = f.source(f.env(&log), testfix.Policy(sign.ModeWarn, f.other)).PackageFor(ctx, f.addr, v("2.0.0"), linux)
	if err != nil || !pkg.FromCache {
		t.Fatalf("warn mode over cached metadata: %v, %+v", err, pkg)
	}
	if a := pkg.Auth; a.Method != "none" || a.Warning == "" || a.Rule != "testfix" || a.Subject != f.idx["2.0.0"].Digest {
		t.Errorf("warn mode over cached metadata: authentication %+v", a)
	}
	if !strings.Contains(log.String(), "warning") || !strings.Contains(log.String(), "2.0.0") {
		t.Errorf("warn mode over cached metadata logged %q", log.String())
	}
	// With no policy, nothing is said.
	log.Reset()
	pkg, err = f.source(f.env(&log), nil).PackageFor(ctx, f.addr, v("2.0.0"), linux)
	if err != nil || pkg.Auth.Warning != "" || log.Len() != 0 {
		t.Errorf("no policy over cached metadata: %v, %+v, log %q", err, pkg.Auth, log.String())
	}
}

// A tag moved since a command cached it: the cache answers with what it saw, and a look
// WithoutCache sees the new release and updates the cache.
func TestOCIMovedTag(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	old := f.rels["1.1.0"]
	if _, err := f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("1.1.0"), linux); err != nil {
		t.Fatal(err)
	}
	moved := old.Republished(t)
	f.repo.Push(t, moved)

	pkg, err := f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("1.1.0"), linux)
	if err != nil || pkg.Zip != old.Zip(linux) || !pkg.FromCache {
		t.Fatalf("cached answer: %v %+v", err, pkg)
	}
	pkg, err = f.source(f.env(nil), nil).PackageFor(source.WithoutCache(ctx), f.addr, v("1.1.0"), linux)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Zip != moved.Zip(linux) || pkg.H1 != moved.H1(linux) || pkg.FromCache {
		t.Errorf("after the tag moved: zip %s h1 %s, want %s %s", pkg.Zip, pkg.H1, moved.Zip(linux), moved.H1(linux))
	}
	pkg, err = f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("1.1.0"), linux)
	if err != nil || pkg.Zip != moved.Zip(linux) || pkg.H1 != moved.H1(linux) {
		t.Errorf("the cache kept the old release: %v %+v", err, pkg)
	}
}

// An h1: a source is told is remembered with the version, for the next command.
// TestOCIRecordedH1IsNoStatement: an h1: written into the cache's version record is not what a
// package states: the index (which a signature or the lock covers) is.
func TestOCIRecordedH1IsNoStatement(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	pkg, err := f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("1.0.0"), linux)
	if err != nil {
		t.Fatal(err)
	}
	want := pkg.H1
	meta, err := f.cache.ReadMeta(f.repo.Ref, "1.0.0")
	if err != nil || meta == nil {
		t.Fatalf("no version record: %v", err)
	}
	meta.Platforms[linux.String()].H1 = "h1:planted"
	if err := f.cache.WriteMeta(f.repo.Ref, meta); err != nil {
		t.Fatal(err)
	}
	pkg, err = f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("1.0.0"), linux)
	if err != nil || pkg.H1 != want || !pkg.FromCache {
		t.Fatalf("after a planted h1: %v, h1 %q (want %q), from cache %v", err, pkg.H1, want, pkg.FromCache)
	}
}

func TestOCIResolveByDigest(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	ref := f.repo.Ref.WithReference(f.idx["1.0.0"].Digest.String())
	src := f.source(f.env(nil), testfix.Policy(sign.ModeEnforce, f.key))
	rv, err := src.Resolve(ctx, ref, f.addr)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := rv.PackageFor(ctx, f.addr, linux)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Zip != f.rels["1.0.0"].Zip(linux) || pkg.Auth.Method != "cosign" {
		t.Errorf("by digest: %+v", pkg)
	}
	// The same digest resolves once per source.
	before := f.reg.Requests()
	if _, err := src.Resolve(ctx, ref, f.addr); err != nil || f.reg.Requests() != before {
		t.Errorf("a second Resolve: %v, %d requests", err, f.reg.Requests()-before)
	}
	if _, err := src.Resolve(ctx, f.repo.Ref.WithReference(f.idx["2.0.0"].Digest.String()), f.addr); err == nil {
		t.Error("an unsigned digest passed the policy")
	}
}

// A Verified shared by sources remembers successful signature checks, and only those.
func TestVerified(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	enforce := testfix.Policy(sign.ModeEnforce, f.key)
	verified := source.NewVerified(2)
	requests := func(src *source.OCI, version string) int64 {
		t.Helper()
		before := f.reg.Requests()
		if _, err := src.Platforms(ctx, f.addr, v(version)); err != nil {
			t.Fatal(err)
		}
		return f.reg.Requests() - before
	}
	plain := requests(f.source(f.env(nil), nil), "1.0.0")
	checked := requests(f.source(f.env(nil), enforce).WithVerified(verified), "1.0.0")
	if verified.Len() != 1 || checked <= plain {
		t.Fatalf("after one check: %d remembered, %d requests (%d with no policy)", verified.Len(), checked, plain)
	}
	if again := requests(f.source(f.env(nil), enforce).WithVerified(verified), "1.0.0"); again != plain {
		t.Errorf("a remembered check cost %d requests, want %d (the index alone)", again, plain)
	}
	pkg, err := f.source(f.env(nil), enforce).WithVerified(verified).PackageFor(source.WithoutCache(ctx), f.addr, v("1.0.0"), linux)
	if err != nil || pkg.Auth.Method != "cosign" || len(pkg.Auth.Keys) != 1 {
		t.Errorf("remembered authentication: %v %+v", err, pkg)
	}
	// Refusals and warn-mode passes are not remembered.
	if _, err := f.source(f.env(nil), enforce).WithVerified(verified).Platforms(ctx, f.addr, v("2.0.0")); err == nil {
		t.Error("an unsigned version passed")
	}
	if _, err := f.source(f.env(nil), testfix.Policy(sign.ModeWarn, f.key)).WithVerified(verified).Platforms(ctx, f.addr, v("3.0.0")); err != nil {
		t.Fatal(err)
	}
	if verified.Len() != 1 {
		t.Errorf("%d remembered, want 1", verified.Len())
	}
	// Full, it starts over.
	requests(f.source(f.env(nil), enforce).WithVerified(verified), "1.1.0")
	if verified.Len() != 2 {
		t.Errorf("%d remembered, want 2", verified.Len())
	}
	requests(f.source(f.env(nil), testfix.Policy(sign.ModeEnforce, f.other)).WithVerified(verified), "3.0.0")
	if verified.Len() != 1 {
		t.Errorf("%d remembered after it filled up, want 1", verified.Len())
	}
}

func samePlatforms(a, b []manifest.Platform) bool {
	key := func(ps []manifest.Platform) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.String())
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// TestOCIForgedEvidence: the cache holds evidence, and every command judges it again, offline,
// under the policy it has now; records planted in the cache can make a check fail, never pass.
func TestOCIForgedEvidence(t *testing.T) {
	f := newRepoFixture(t)
	ctx := context.Background()
	enforce := testfix.Policy(sign.ModeEnforce, f.key)
	for _, ver := range []string{"1.0.0", "3.0.0"} {
		if _, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v(ver), linux); ver == "1.0.0" && err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.source(f.env(nil), nil).PackageFor(ctx, f.addr, v("2.0.0"), linux); err != nil {
		t.Fatal(err)
	}
	f.reg.SetDown(true)
	defer f.reg.SetDown(false)

	// Offline, the evidence proves 1.0.0 again (the check ran: the trusted key is in the result).
	pkg, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v("1.0.0"), linux)
	if err != nil || !pkg.FromCache || pkg.Auth.Method != "cosign" {
		t.Fatalf("offline from evidence: %v %+v", err, pkg)
	}
	// A policy that trusts only the other key refuses it offline: nothing remembers a verdict.
	if _, err := f.source(f.env(nil), testfix.Policy(sign.ModeEnforce, f.other)).PackageFor(ctx, f.addr, v("1.0.0"), linux); err == nil {
		t.Error("offline, a version signed by key A passed a policy trusting only key B")
	}
	// 2.0.0 (unsigned) and 3.0.0 (signed by the other key) stay refused however the records lie:
	// 1.0.0's signature records are copied onto theirs, and 1.0.0's tag record onto theirs.
	refs := filepath.Join(f.cache.Dir, "evidence", "refs", strings.ReplaceAll(f.reg.Host, ":", "_"), "providers", "acme", "hello")
	sig := func(ver string) string { return "sha256-" + f.idx[ver].Digest.Encoded() }
	for _, ver := range []string{"2.0.0", "3.0.0"} {
		if _, err := os.Stat(filepath.Join(refs, "tags", sig("1.0.0")+".sig.json")); err == nil { // the .sig form
			copyFile(t, filepath.Join(refs, "tags", sig("1.0.0")+".sig.json"), filepath.Join(refs, "tags", sig(ver)+".sig.json"))
		}
		copyFile(t, filepath.Join(refs, "referrers", f.idx["1.0.0"].Digest.Encoded()+".json"), filepath.Join(refs, "referrers", f.idx[ver].Digest.Encoded()+".json"))
		if _, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v(ver), linux); err == nil {
			t.Errorf("%s passed with another version's signature records", ver)
		}
		copyFile(t, filepath.Join(refs, "tags", "1.0.0.json"), filepath.Join(refs, "tags", ver+".json"))
		if _, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v(ver), linux); err == nil {
			t.Errorf("%s passed with its tag record pointed at 1.0.0's index", ver)
		}
	}
	// Old-style verdicts in the version record count for nothing.
	data, err := os.ReadFile(filepath.Join(f.cache.Dir, "versions", strings.ReplaceAll(f.reg.Host, ":", "_"), "providers", "acme", "hello", "2.0.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(data), "{", `{"verified_by":["`+f.key.Public.Hint+`"],"verified_keys":["testfix"],`, 1)
	if err := os.WriteFile(filepath.Join(f.cache.Dir, "versions", strings.ReplaceAll(f.reg.Host, ":", "_"), "providers", "acme", "hello", "2.0.0.json"), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.source(f.env(nil), enforce).PackageFor(ctx, f.addr, v("2.0.0"), linux); err == nil {
		t.Error("a planted verified_by record passed")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
