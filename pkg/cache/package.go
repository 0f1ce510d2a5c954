package cache

import (
	"context"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
)

// Package is one platform's package of a provider version, as every source gives it and the
// cache takes it in (Install): what it is, where its bytes are, and how it was authenticated. It
// is OpenTofu's PackageMeta with its PackageLocation. Exactly one location is set: Fetch, an
// archive (an OCI blob, or an origin registry's zip) checked against Zip and Size as it streams
// in; or Build, made on this machine from source kept beside the configuration.
type Package struct {
	Addr     manifest.ProviderAddress
	Version  string
	Platform manifest.Platform
	Filename string
	// Zip and Size identify the archive (its sha256 is the lock file's zh: hash); Size is -1 when
	// the source does not know it.
	Zip  digest.Digest
	Size int64
	// MaxSize bounds an archive of unknown Size (the registry client's maximum package size);
	// 0 is the default.
	MaxSize int64
	// H1 is the unpacked package's h1: hash as the source states it (an index's annotation), or
	// "": the cache refuses a package that does not hash to it.
	H1 string
	// Fetch streams the archive into w, reporting to progress (which may be nil).
	Fetch func(ctx context.Context, w io.Writer, progress oci.Progress) error
	// Build makes the package from source.
	Build *Build
	Auth  Authentication
	// FromCache is true when the source answered from cached metadata without asking its origin.
	FromCache bool
	// Detail says how a local package was made ("source, built"), for messages.
	Detail string
}

// Build is a package made on this machine: Make writes the executable Name, and whatever it
// needs beside it, into an empty directory, which the cache keeps under Key (a hash of everything
// the build depends on) and makes once, whoever else asks at the same time.
type Build struct {
	Key  string
	Name string
	Make func(ctx context.Context, dir string) error
	// Fresh says, for messages, how a package made in this call was made ("source, built").
	Fresh string
}

// Authentication says how a package was authenticated.
type Authentication struct {
	// Method is "cosign" (a signature over the index digest), "gpg" (an origin's signed
	// SHA256SUMS), "none" (no policy applies), or "local" (built from source on this machine).
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

// Learn takes the h1: hash the cache computed from the package's archive, when the source did not
// know it. It is kept on the package for this command only: a hash remembered on disk would be a
// verdict whoever can write the cache could forge.
func (p *Package) Learn(h1 string) {
	if p.H1 == "" {
		p.H1 = h1
	}
}

// reporting gives the package with its archive's progress reported to progress (when it is not
// nil), for the cache's steps, which fetch without one.
func (p *Package) reporting(progress oci.Progress) *Package {
	if progress == nil || p.Fetch == nil {
		return p
	}
	q, fetch := *p, p.Fetch
	q.Fetch = func(ctx context.Context, w io.Writer, _ oci.Progress) error { return fetch(ctx, w, progress) }
	return &q
}

func (p *Package) name() string { return p.Addr.String() + " " + p.Version }
