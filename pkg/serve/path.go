package serve

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
)

// The Provider Network Mirror Protocol's documents, below the base URL:
//
//	HOSTNAME/NAMESPACE/TYPE/index.json      the versions
//	HOSTNAME/NAMESPACE/TYPE/VERSION.json    each platform's archive URL and hashes
//
// and the archives, which the protocol lets the server place anywhere; here beside the JSON, named
// as in a packed filesystem mirror:
//
//	HOSTNAME/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip

// docKind is what a request asks for.
type docKind int

const (
	docIndex docKind = iota
	docVersion
	docArchive
)

// request is a parsed protocol path.
type request struct {
	kind     docKind
	addr     manifest.ProviderAddress
	version  versions.Version // for docVersion and docArchive
	platform manifest.Platform
}

var errNotProtocol = errors.New("not a provider mirror path: want /HOSTNAME/NAMESPACE/TYPE/index.json, /HOSTNAME/NAMESPACE/TYPE/VERSION.json or an archive named in VERSION.json")

// parsePath parses a protocol path ("/example.com/acme/hello/1.0.0.json").
func parsePath(p string) (request, error) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) != 4 || !strings.HasPrefix(p, "/") || !utf8.ValidString(p) {
		return request{}, errNotProtocol
	}
	addr, err := parseAddress(strings.Join(parts[:3], "/"))
	if err != nil {
		return request{}, err
	}
	rq := request{addr: addr}
	name := parts[3]
	switch {
	case name == "index.json":
		rq.kind = docIndex
	case strings.HasSuffix(name, ".json"):
		rq.kind = docVersion
		rq.version, err = canonicalVersion(strings.TrimSuffix(name, ".json"))
	case strings.HasSuffix(name, ".zip"):
		rq.kind = docArchive
		rq.version, rq.platform, err = parseArchiveName(addr.Type, name)
	default:
		err = errNotProtocol
	}
	if err != nil {
		return request{}, err
	}
	return rq, nil
}

// parseAddress parses a provider address from a request path. OpenTofu's parser lets some
// names through that its own display form then panics on or changes (invalid UTF-8, which
// parsePath refuses first, and hostnames IDNA rejects): those are refused, since paths come
// from anyone.
func parseAddress(s string) (addr manifest.ProviderAddress, err error) {
	if addr, err = manifest.ParseProviderAddress(s); err != nil {
		return addr, err
	}
	defer func() {
		if recover() != nil {
			addr, err = manifest.ProviderAddress{}, fmt.Errorf("provider address %q: invalid hostname", s)
		}
	}()
	_ = addr.String()
	return addr, nil
}

// canonicalVersion accepts a version only in its one canonical spelling, so that one version
// has one URL.
func canonicalVersion(s string) (versions.Version, error) {
	return manifest.ParseVersion(s)
}

// archiveName is the file name of one platform's archive: terraform-provider-TYPE_VERSION_OS_ARCH.zip.
func archiveName(typ, version string, p manifest.Platform) string {
	return "terraform-provider-" + typ + "_" + version + "_" + p.String() + ".zip"
}

// parseArchiveName is archiveName's inverse for a known provider type (which may itself hold '_').
func parseArchiveName(typ, name string) (versions.Version, manifest.Platform, error) {
	bad := func() (versions.Version, manifest.Platform, error) {
		return versions.Version{}, manifest.Platform{}, fmt.Errorf("archive %q: want %s", name, archiveName(typ, "VERSION", manifest.Platform{OS: "OS", Arch: "ARCH"}))
	}
	rest, ok := strings.CutPrefix(name, "terraform-provider-"+typ+"_")
	if !ok {
		return bad()
	}
	if rest, ok = strings.CutSuffix(rest, ".zip"); !ok {
		return bad()
	}
	i := strings.LastIndex(rest, "_")
	if i < 0 {
		return bad()
	}
	j := strings.LastIndex(rest[:i], "_")
	if j < 0 {
		return bad()
	}
	p, err := manifest.ParsePlatform(rest[j+1:])
	if err != nil {
		return bad()
	}
	v, err := canonicalVersion(rest[:j])
	if err != nil {
		return versions.Version{}, manifest.Platform{}, err
	}
	return v, p, nil
}
