package module

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	tfaddr "github.com/opentofu/registry-address"
)

// Kind is the kind of a module source address.
type Kind int

// The kinds of source address a module call can have.
const (
	KindLocal    Kind = iota // ./dir or ../dir: part of its caller
	KindRegistry             // [host/]namespace/name/system, through the Module Registry Protocol
	KindGit                  // git::URL[?ref=...]
	kindHTTP                 // an HTTP(S) archive (.zip, .tar.gz, .tgz, .tar, or ?archive=)
	KindOCI                  // oci://host/repository[?tag=|?digest=]
)

func (k Kind) String() string {
	return [...]string{"local", "registry", "git", "http", "oci"}[k]
}

// Source is a parsed module source address.
type Source struct {
	Kind Kind
	// Registry is the registry package (KindRegistry).
	Registry tfaddr.ModulePackage
	// URL is the package's location without its getter prefix and subdirectory, its query kept
	// but for the parameters below (KindGit, kindHTTP); host/repository for KindOCI.
	URL string
	// Ref is a git ?ref= (tag, branch or commit); Tag and Digest an OCI ?tag= or ?digest=;
	// Archive an HTTP ?archive= type.
	Ref, Tag, Digest, Archive string
	// Subdir is the module's directory inside the package (never with ..).
	Subdir string
	// Local is a local path as written (KindLocal).
	Local string
}

// errSource marks a source address oprov cannot resolve.
var errSource = errors.New("unsupported module source address")

// errOtherGetter marks a well-formed address of a kind oprov does not resolve (go-getter's s3::,
// gcs::, hg::, and the github.com and bitbucket.org shorthands); it wraps errSource.
var errOtherGetter = fmt.Errorf("%w (a kind oprov does not resolve)", errSource)

// ParseSource parses a module call's source argument as OpenTofu does for the forms oprov
// resolves: local paths, registry addresses, git::, HTTP(S) archives and oci://.
func ParseSource(raw string) (Source, error) {
	switch {
	case raw == "":
		return Source{}, fmt.Errorf("%w: empty source", errSource)
	case !utf8.ValidString(raw) || strings.ContainsFunc(raw, unicode.IsControl):
		return Source{}, fmt.Errorf("%w: %q holds invalid UTF-8 or control characters", errSource, raw)
	case strings.HasPrefix(raw, "./"), strings.HasPrefix(raw, "../"), raw == ".", raw == "..":
		clean := path.Clean(raw)
		if clean != "." && clean != ".." && !strings.HasPrefix(clean, "../") {
			clean = "./" + clean // ./.x stays local: .x would read as a registry address
		}
		return Source{Kind: KindLocal, Local: clean}, nil
	case strings.HasPrefix(raw, "git::"):
		return parseGetter(KindGit, strings.TrimPrefix(raw, "git::"))
	case strings.HasPrefix(raw, "oci://"):
		return parseOCI(raw)
	case strings.HasPrefix(raw, "http::"), strings.HasPrefix(raw, "https::"):
		_, rest, _ := strings.Cut(raw, "::")
		return parseGetter(kindHTTP, rest)
	case strings.HasPrefix(raw, "https://"), strings.HasPrefix(raw, "http://"):
		if looksGit(raw) {
			return parseGetter(KindGit, raw)
		}
		return parseGetter(kindHTTP, raw)
	case strings.Contains(raw, "::"):
		getter, _, _ := strings.Cut(raw, "::")
		if getter == "ext" || getter == "file" {
			return Source{}, fmt.Errorf("%w: %q: the %s:: getter is not allowed", errSource, raw, getter)
		}
		return Source{}, fmt.Errorf("%w: %q (the %s:: getter; oprov resolves registry addresses, git::, http(s):// archives, oci:// and local paths)", errOtherGetter, raw, getter)
	case strings.HasPrefix(raw, "github.com/"), strings.HasPrefix(raw, "bitbucket.org/"):
		return Source{}, fmt.Errorf("%w: %q (a shorthand; write git::https://%s.git instead)", errOtherGetter, raw, strings.SplitN(raw, "?", 2)[0])
	}
	m, err := tfaddr.ParseModuleSource(raw)
	if err != nil {
		return Source{}, fmt.Errorf("%w: %q: %v", errSource, raw, err)
	}
	sub, err := cleanSubdir(m.Subdir)
	if err != nil {
		return Source{}, err
	}
	if err := displayable(m.Package); err != nil {
		return Source{}, fmt.Errorf("%w: %q: %v", errSource, raw, err)
	}
	return Source{Kind: KindRegistry, Registry: m.Package, Subdir: sub}, nil
}

// looksGit says whether an http(s):// address without a getter names a git repository: its path,
// without the //subdirectory and the query, ends in .git. The subdirectory is taken out first, so
// that the address and its canonical form (String) are read as the same kind.
func looksGit(raw string) bool {
	rest, _, err := splitSubdir(raw)
	if err != nil {
		rest = raw
	}
	return strings.HasSuffix(strings.SplitN(rest, "?", 2)[0], ".git")
}

// displayable checks that a registry package can be written out: the hostname library panics
// on a hostname it accepted but cannot display.
func displayable(p tfaddr.ModulePackage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("invalid hostname: %v", r)
		}
	}()
	_ = p.String()
	return nil
}

// cleanSubdir normalizes a package subdirectory, refusing one that leaves the package.
func cleanSubdir(sub string) (string, error) {
	if sub == "" {
		return "", nil
	}
	sub = strings.TrimLeft(path.Clean("/"+sub), "/")
	if sub == "" || sub == "." {
		return "", nil
	}
	for _, part := range strings.Split(sub, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: subdirectory %q leads outside the module package", errSource, sub)
		}
	}
	return sub, nil
}

// splitSubdir takes a "//subdir" out of an address (before its query), as go-getter does.
func splitSubdir(s string) (string, string, error) {
	stop := len(s)
	if i := strings.Index(s, "?"); i >= 0 {
		stop = i
	}
	off := 0
	if i := strings.Index(s[:stop], "://"); i >= 0 {
		off = i + 3
	}
	i := strings.Index(s[off:stop], "//")
	if i < 0 {
		return s, "", nil
	}
	i += off
	sub := s[i+2 : stop]
	s = s[:i] + s[stop:]
	if sub == "" {
		return s, "", nil
	}
	if c := path.Clean(sub); c == ".." || strings.HasPrefix(c, "../") {
		return "", "", fmt.Errorf("%w: subdirectory %q leads outside the module package", errSource, sub)
	}
	sub, err := cleanSubdir(sub)
	return s, sub, err
}

// parseGetter parses a git or HTTP address: scheme://host/path[//subdir][?query].
func parseGetter(kind Kind, raw string) (Source, error) {
	if strings.Contains(raw, "#") {
		return Source{}, fmt.Errorf("%w: %q: a module address has no #fragment", errSource, raw)
	}
	rest, sub, err := splitSubdir(raw)
	if err != nil {
		return Source{}, err
	}
	u, err := url.Parse(rest)
	if err != nil || u.Host == "" {
		if kind == KindGit && scpLike(rest) {
			return parseSCP(rest, sub)
		}
		return Source{}, fmt.Errorf("%w: %q is not a URL with a host", errSource, raw)
	}
	switch {
	case kind == kindHTTP && u.Scheme != "https" && u.Scheme != "http":
		return Source{}, fmt.Errorf("%w: %q: an archive is fetched over http or https only", errSource, raw)
	case kind == KindGit && !gitSchemes[u.Scheme]:
		return Source{}, fmt.Errorf("%w: %q: git over %q is not allowed (use https, http, ssh or git)", errSource, raw, u.Scheme)
	case u.User != nil && kind == kindHTTP:
		return Source{}, fmt.Errorf("%w: %q: credentials in an archive URL are not allowed", errSource, raw)
	}
	q := u.Query()
	s := Source{Kind: kind, Subdir: sub}
	take := func(k string) (string, error) {
		if vs := q[k]; len(vs) > 1 {
			return "", fmt.Errorf("%w: %q gives ?%s= more than once", errSource, raw, k)
		}
		v := q.Get(k)
		q.Del(k)
		return v, nil
	}
	if kind == KindGit {
		if s.Ref, err = take("ref"); err != nil {
			return Source{}, err
		}
		if q.Has("depth") || q.Has("sshkey") {
			return Source{}, fmt.Errorf("%w: %q: ?depth= and ?sshkey= are not supported", errSource, raw)
		}
		if strings.HasPrefix(s.Ref, "-") {
			return Source{}, fmt.Errorf("%w: %q: a ref may not start with '-'", errSource, raw)
		}
	} else if s.Archive, err = take("archive"); err != nil {
		return Source{}, err
	}
	u.RawQuery = q.Encode()
	u.Fragment = ""
	s.URL = u.String()
	return s, nil
}

var gitSchemes = map[string]bool{"https": true, "http": true, "ssh": true, "git": true}

// scpLike reports an scp-like git address, user@host:path.
func scpLike(s string) bool {
	at := strings.Index(s, "@")
	colon := strings.Index(s, ":")
	return at > 0 && colon > at+1 && !strings.Contains(s[:colon], "/") && !strings.HasPrefix(s, "-")
}

func parseSCP(raw, sub string) (Source, error) {
	addr, query, _ := strings.Cut(raw, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return Source{}, fmt.Errorf("%w: %q: %v", errSource, raw, err)
	}
	s := Source{Kind: KindGit, Subdir: sub, Ref: q.Get("ref")}
	if len(q["ref"]) > 1 || strings.HasPrefix(s.Ref, "-") {
		return Source{}, fmt.Errorf("%w: %q: bad ?ref=", errSource, raw)
	}
	q.Del("ref")
	s.URL = addr
	if len(q) > 0 {
		s.URL += "?" + q.Encode()
	}
	return s, nil
}

// parseOCI parses oci://host/repository[//subdir][?tag=T|?digest=D].
func parseOCI(raw string) (Source, error) {
	rest, sub, err := splitSubdir(raw)
	if err != nil {
		return Source{}, err
	}
	addr, query, _ := strings.Cut(strings.TrimPrefix(rest, "oci://"), "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return Source{}, fmt.Errorf("%w: %q: %v", errSource, raw, err)
	}
	s := Source{Kind: KindOCI, URL: addr, Tag: q.Get("tag"), Digest: q.Get("digest"), Subdir: sub}
	q.Del("tag")
	q.Del("digest")
	switch {
	case len(q) > 0:
		return Source{}, fmt.Errorf("%w: %q: an oci:// address takes only ?tag= or ?digest=", errSource, raw)
	case s.Tag != "" && s.Digest != "":
		return Source{}, fmt.Errorf("%w: %q gives both ?tag= and ?digest=", errSource, raw)
	case !strings.Contains(addr, "/") || strings.HasPrefix(addr, "/"):
		return Source{}, fmt.Errorf("%w: %q: want oci://HOST/REPOSITORY", errSource, raw)
	}
	return s, nil
}

// Package is the package's address, without the subdirectory: what is fetched.
func (s Source) Package() string {
	switch s.Kind {
	case KindLocal:
		return s.Local
	case KindRegistry:
		return s.Registry.String()
	case KindOCI:
		return "oci://" + s.URL + query("tag", s.Tag, "digest", s.Digest)
	case KindGit:
		return "git::" + withParam(s.URL, "ref", s.Ref)
	default:
		p := withParam(s.URL, "archive", s.Archive)
		if looksGit(p) {
			return "http::" + p // forced: without the getter it would read as a git repository
		}
		return p
	}
}

// String is the full source address: the package with its subdirectory, the subdirectory
// before any query, as OpenTofu writes it.
func (s Source) String() string {
	p := s.Package()
	if s.Subdir == "" || s.Kind == KindLocal {
		return p
	}
	if s.Kind == KindRegistry {
		return p + "//" + s.Subdir
	}
	base, q, ok := strings.Cut(p, "?")
	if ok {
		return base + "//" + s.Subdir + "?" + q
	}
	return p + "//" + s.Subdir
}

func query(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			parts = append(parts, kv[i]+"="+url.QueryEscape(kv[i+1]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "?" + strings.Join(parts, "&")
}

// withParam adds ?k=v (when v is set) to an address that may have a query already.
func withParam(addr, k, v string) string {
	if v == "" {
		return addr
	}
	sep := "?"
	if strings.Contains(addr, "?") {
		sep = "&"
	}
	return addr + sep + k + "=" + url.QueryEscape(v)
}
