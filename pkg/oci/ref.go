// Package oci opens the places a provider artifact lives: a repository in an OCI registry or an
// OCI image layout on disk, both as oras-go targets. It owns the network policy (TLS verified,
// extra CAs, plain HTTP only when asked or for loopback), credentials from docker-style config
// files and helpers, retries, and the errors that tell a user what to do; and the small transfer
// steps every writer shares (push if missing, progress). What is stored there is other packages'
// business: pkg/artifact for provider releases, pkg/oci/referrers for what refers to them.
package oci

import (
	"fmt"
	"net"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry"
)

// LayoutScheme prefixes a reference to an OCI image layout directory: oci-layout:DIR[:TAG].
const LayoutScheme = "oci-layout:"

// Ref names a repository, and optionally a tag or digest in it. Exactly one of Layout and
// Registry is set.
type Ref struct {
	Layout     string // directory of an OCI image layout
	Registry   string // HOST[:PORT]
	Repository string // PATH inside the registry
	// Reference is a tag or a digest, or "" when the reference names only the repository.
	Reference string
}

// ParseRef parses HOST[:PORT]/PATH[:TAG|@DIGEST] or oci-layout:DIR[:TAG|@DIGEST].
func ParseRef(s string) (Ref, error) {
	if rest, ok := strings.CutPrefix(s, LayoutScheme); ok {
		if rest == "" {
			return Ref{}, fmt.Errorf("reference %q: no directory after %s", s, LayoutScheme)
		}
		r := Ref{Layout: rest}
		if i := strings.LastIndex(rest, "@"); i >= 0 {
			if _, err := digest.Parse(rest[i+1:]); err == nil {
				r.Layout, r.Reference = rest[:i], rest[i+1:]
			}
		} else if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.ContainsAny(rest[i+1:], `/\`) && i > 1 {
			r.Layout, r.Reference = rest[:i], rest[i+1:]
		}
		return r, nil
	}
	if !strings.Contains(s, "/") {
		return Ref{}, fmt.Errorf("reference %q: want HOST[:PORT]/PATH[:TAG] (a registry host and a repository path) or %sDIR", s, LayoutScheme)
	}
	pr, err := registry.ParseReference(s)
	if err != nil {
		return Ref{}, fmt.Errorf("reference %q: %v (want HOST[:PORT]/PATH[:TAG] or %sDIR)", s, unwrapAll(err), LayoutScheme)
	}
	return Ref{Registry: pr.Registry, Repository: pr.Repository, Reference: pr.Reference}, nil
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// IsLayout reports whether the reference names an OCI layout directory.
func (r Ref) IsLayout() bool { return r.Layout != "" }

// Repo gives the reference without its tag or digest.
func (r Ref) Repo() string {
	if r.IsLayout() {
		return LayoutScheme + r.Layout
	}
	return r.Registry + "/" + r.Repository
}

// String gives the reference back in the form it was parsed from.
func (r Ref) String() string {
	s := r.Repo()
	switch {
	case r.Reference == "":
	case strings.Contains(r.Reference, ":"): // a digest
		s += "@" + r.Reference
	default:
		s += ":" + r.Reference
	}
	return s
}

// WithReference returns the same repository with another tag or digest.
func (r Ref) WithReference(ref string) Ref {
	r.Reference = ref
	return r
}

// IsDigest reports whether the reference part is a digest.
func (r Ref) IsDigest() bool {
	_, err := digest.Parse(r.Reference)
	return err == nil
}

// Host gives the registry host name without the port.
func (r Ref) Host() string {
	h, _, err := net.SplitHostPort(r.Registry)
	if err != nil {
		return r.Registry
	}
	return h
}

// IsLoopback reports whether the registry is on this machine.
func (r Ref) IsLoopback() bool {
	h := r.Host()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}
