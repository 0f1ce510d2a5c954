package loader

import (
	"context"
	"io"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
)

// Source is where providers come from, as in OpenTofu's provider installer: it lists the versions
// of a provider it offers and says, for one version and platform, where the package is and how it
// was authenticated. The installer, lock, run and schema hold Sources and do not care which kind.
//
// Kinds today: an OCI repository (an oci_mirror block, source_oci.go), and a directory of provider
// source beside the configuration (a provider block, source_godir.go). Adding a kind means one new
// file and its registration (registerLocalKind for a source directory, or a block in config.go).
type Source interface {
	// AvailableVersions lists the versions of addr the source offers.
	AvailableVersions(ctx context.Context, addr artifact.ProviderAddress) (versions.List, error)
	// Platforms lists the platforms a version has packages for.
	Platforms(ctx context.Context, addr artifact.ProviderAddress, version versions.Version) ([]manifest.Platform, error)
	// PackageFor says where one platform's package of a version is, and how it was authenticated.
	// It resolves whatever names the version once per command and works by digest afterwards.
	PackageFor(ctx context.Context, addr artifact.ProviderAddress, version versions.Version, platform manifest.Platform) (*Package, error)
	// ForDisplay names where addr comes from, for messages.
	ForDisplay(addr artifact.ProviderAddress) string
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
	Addr     artifact.ProviderAddress
	Version  string
	Platform manifest.Platform
	Filename string
	// Zip and Size identify the zip (its sha256 is the lock file's zh: hash).
	Zip  digest.Digest
	Size int64
	// H1 is the unpacked package's h1: hash when the source knows it without the zip.
	H1 string
	// Fetch streams the zip into w, checked against Zip and Size.
	Fetch func(ctx context.Context, w io.Writer, progress oci.Progress) error
	// RecordH1, when set, tells the source the h1: hash computed from the zip, to remember.
	RecordH1 func(h1 string) error
	// Executable is a ready-to-launch provider (local sources).
	Executable string
	Auth       Authentication
	// FromCache is true when the source answered from cached metadata without asking its origin.
	FromCache bool
	// Detail says how a local package was made ("built", "cached build"), for messages.
	Detail string
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
}

type noCacheKey struct{}

// withoutCache asks sources to go to their origin rather than answer from cached metadata: for a
// second look when a cached answer disagrees with the lock file.
func withoutCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, noCacheKey{}, true)
}

func cacheAllowed(ctx context.Context) bool { return ctx.Value(noCacheKey{}) == nil }

// localKind is a kind of provider source directory: detect says whether a directory is one.
type localKind struct {
	name   string
	detect func(dir string) bool
	open   func(sp *SourceProvider, opts *Options) LocalSource
}

var localKinds []localKind

// registerLocalKind adds a kind of source directory; each kind registers itself from its file.
func registerLocalKind(k localKind) { localKinds = append(localKinds, k) }

// openLocal opens a provider source directory as the first kind that recognises it.
func openLocal(sp *SourceProvider, opts *Options) (LocalSource, bool) {
	for _, k := range localKinds {
		if k.detect(sp.Dir) {
			return k.open(sp, opts), true
		}
	}
	return nil, false
}
