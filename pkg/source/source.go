// Package source is where providers come from: one small notion (list versions, say where a
// platform's package is and how it was authenticated) with several kinds behind it, modelled on
// OpenTofu's provider installer. The loader, the serving mirror and the mirroring commands hold
// Sources and do not care which kind.
package source

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/internal/referrers"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
)

// Source is where providers come from, as in OpenTofu's provider installer: it lists the versions
// of a provider it offers and says, for one version and platform, where the package is and how it
// was authenticated. The installer, lock, run and schema hold Sources and do not care which kind.
//
// Kinds: an OCI repository (oci.go), a directory of provider source beside the configuration
// (godir.go, registered with registerLocalKind), and an origin provider registry (pkg/mirror).
// Adding a kind means one new file and its registration.
type Source interface {
	// AvailableVersions lists the versions of addr the source offers.
	AvailableVersions(ctx context.Context, addr manifest.ProviderAddress) (versions.List, error)
	// Platforms lists the platforms a version has packages for.
	Platforms(ctx context.Context, addr manifest.ProviderAddress, version versions.Version) ([]manifest.Platform, error)
	// PackageFor says where one platform's package of a version is, and how it was authenticated.
	// It resolves whatever names the version once per command and works by digest afterwards.
	PackageFor(ctx context.Context, addr manifest.ProviderAddress, version versions.Version, platform manifest.Platform) (*Package, error)
	// ForDisplay names where addr comes from, for messages.
	ForDisplay(addr manifest.ProviderAddress) string
}

// LocalSource is a Source kept beside the configuration: its packages are executables built on
// this machine, launched by 'oprov run' and never locked or installed.
type LocalSource interface {
	Source
	Dir() string
}

// Package is one platform's package of a provider version. Exactly one of Fetch and Executable is
// set: a zip to be cached and unpacked, or an executable ready to launch.
type Package struct {
	Addr     manifest.ProviderAddress
	Version  string
	Platform manifest.Platform
	Filename string
	// Zip and Size identify the zip (its sha256 is the lock file's zh: hash); Size is -1 when the
	// source does not know it.
	Zip  digest.Digest
	Size int64
	// MaxSize bounds a zip of unknown Size (the registry client's maximum package size).
	MaxSize int64
	// H1 is the unpacked package's h1: hash when the source knows it without the zip.
	H1 string
	// Fetch streams the zip into w, checked against Zip and Size.
	Fetch func(ctx context.Context, w io.Writer, progress oci.Progress) error
	// Executable is a ready-to-launch provider (local sources).
	Executable string
	Auth       Authentication
	// FromCache is true when the source answered from cached metadata without asking its origin.
	FromCache bool
	// Detail says how a local package was made ("built", "cached build"), for messages.
	Detail string
}

// ForCache is the package as the cache takes it in (cache.Install, cache.PutZip), its zip
// fetched with progress reported to progress.
func (p *Package) ForCache(progress oci.Progress) *cache.Package {
	return &cache.Package{
		Addr: p.Addr, Version: p.Version, Platform: p.Platform, Filename: p.Filename,
		Zip: p.Zip, Size: p.Size, MaxSize: p.MaxSize, H1: p.H1,
		Fetch: func(ctx context.Context, w io.Writer) error { return p.Fetch(ctx, w, progress) },
	}
}

// Learn takes the h1: hash the cache computed from the package's zip, when the source did not
// know it. It is kept on the package for this command only: a hash remembered on disk would be a
// verdict whoever can write the cache could forge.
func (p *Package) Learn(h1 string) error {
	if p.H1 != "" || h1 == "" {
		return nil
	}
	p.H1 = h1
	return nil
}

// Authentication says how a package was authenticated.
type Authentication struct {
	// Method is "cosign" (a signature over the index digest), "none" (no policy applies), or
	// "local" (built from source on this machine).
	Method string `json:"method"`
	// Subject is the digest the signature covers (the version's index).
	Subject digest.Digest `json:"subject,omitempty"`
	// Keys are the trusted keys whose signatures checked out.
	Keys []string `json:"keys,omitempty"`
	// Rule is the trust rule that applied.
	Rule string `json:"rule,omitempty"`
	// Warning is set when a warn-mode rule let an unverified version through.
	Warning string `json:"warning,omitempty"`
	// Evidence is what proves the authentication to someone else (an origin's signed
	// SHA256SUMS, say), for a mirror to attach beside the copy it publishes.
	Evidence *Evidence `json:"-"`
}

// Evidence is a set of files to attach as one referrer: its artifact type, files and annotations.
type Evidence struct {
	ArtifactType string
	Files        []referrers.AttachFile
	Annotations  map[string]string
}

// Screener is a Source that can leave out versions oprov could not use although they meet the
// constraints (an origin's versions that speak no plugin protocol oprov launches, say). It warns
// about each it leaves out, and fails when none is left.
type Screener interface {
	Screen(ctx context.Context, addr manifest.ProviderAddress, list versions.List, warn func(string)) (versions.List, error)
}

type noCacheKey struct{}

// WithoutCache asks sources to go to their origin rather than answer from cached metadata: for a
// second look when a cached answer disagrees with the lock file.
func WithoutCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, noCacheKey{}, true)
}

func cacheAllowed(ctx context.Context) bool { return ctx.Value(noCacheKey{}) == nil }

// Env is what a command's sources share: the cache, the registry policy, where warnings go, and
// a flag set once any source opened a registry.
type Env struct {
	Cache *cache.Cache
	// Registry is the one registry client (nil: oci.NewClient's defaults).
	Registry *oci.Client
	Log      io.Writer
	Network  atomic.Bool
	warned   sync.Map // versions warned about, "ADDR VERSION"
}

// registry gives the registry client.
func (e *Env) registry() *oci.Client {
	if e.Registry == nil {
		return oci.NewClient(oci.Options{})
	}
	return e.Registry
}

// limits gives what a registry may serve.
func (e *Env) limits() oci.Limits { return e.Registry.Bounds() }

// warn says once per Env (a command, or one generation of a server) that a warn-mode policy let
// a version through unverified, and why.
func (e *Env) warn(addr manifest.ProviderAddress, version, why string) {
	if _, said := e.warned.LoadOrStore(addr.String()+" "+version, true); !said {
		e.logf("oprov: warning (policy mode warn): %s %s: %s", addr, version, why)
	}
}

func (e *Env) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

// Host is this machine's platform.
func Host() manifest.Platform { return manifest.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH} }

// LocalDir is a directory of provider source named in a configuration.
type LocalDir struct {
	Addr manifest.ProviderAddress
	Dir  string // absolute
	At   string // FILE:LINE of the declaration, for messages
}

// LocalKind is a kind of provider source directory: Detect says whether a directory is one.
type LocalKind struct {
	Name   string
	Detect func(dir string) bool
	Open   func(d LocalDir, env *Env) LocalSource
	// First kinds are asked before the others: a stdio provider's manifest says what its
	// directory is even when the directory is also a Go module or a Python project.
	First bool
}

var localKinds []LocalKind

// registerLocalKind adds a kind of source directory; each kind registers itself from its file.
func registerLocalKind(k LocalKind) {
	if k.First {
		localKinds = append([]LocalKind{k}, localKinds...)
		return
	}
	localKinds = append(localKinds, k)
}

// OpenLocal opens a provider source directory as the first kind that recognises it, or as a
// source whose every answer says no kind does.
func OpenLocal(d LocalDir, env *Env) LocalSource {
	for _, k := range localKinds {
		if k.Detect(d.Dir) {
			return k.Open(d, env)
		}
	}
	return unknownDir{d}
}

// unknownDir is a source directory no registered kind recognises.
type unknownDir struct{ d LocalDir }

func (u unknownDir) err() error {
	var kinds []string
	for _, k := range localKinds {
		kinds = append(kinds, k.Name)
	}
	return fmt.Errorf("%s: provider %q: %s is not a provider source directory oprov can build (want one of: %s)", u.d.At, u.d.Addr, u.d.Dir, strings.Join(kinds, ", "))
}

func (u unknownDir) Dir() string                                { return u.d.Dir }
func (u unknownDir) ForDisplay(manifest.ProviderAddress) string { return u.d.Dir }
func (u unknownDir) AvailableVersions(context.Context, manifest.ProviderAddress) (versions.List, error) {
	return nil, u.err()
}
func (u unknownDir) Platforms(context.Context, manifest.ProviderAddress, versions.Version) ([]manifest.Platform, error) {
	return nil, u.err()
}
func (u unknownDir) PackageFor(context.Context, manifest.ProviderAddress, versions.Version, manifest.Platform) (*Package, error) {
	return nil, u.err()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func platformList(ps []manifest.Platform) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}
