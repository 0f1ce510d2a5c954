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
	PackageFor(ctx context.Context, addr manifest.ProviderAddress, version versions.Version, platform manifest.Platform) (*cache.Package, error)
	// ForDisplay names where addr comes from, for messages.
	ForDisplay(addr manifest.ProviderAddress) string
}

// LocalSource is a Source kept beside the configuration: its packages are executables built on
// this machine, launched by 'oprov run' and never locked or installed.
type LocalSource interface {
	Source
	Dir() string
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
}

// localKinds are the kinds of source directory, asked in order: a stdio provider's manifest says
// what its directory is even when the directory is also a Go module or a Python project.
var localKinds = []LocalKind{stdioKind, goKind, pythonKind}

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
func (u unknownDir) PackageFor(context.Context, manifest.ProviderAddress, versions.Version, manifest.Platform) (*cache.Package, error) {
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
