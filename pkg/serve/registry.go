package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/source"
)

// The Provider Registry Protocol (providers.v1), below registryPath:
//
//	HOSTNAME/NAMESPACE/TYPE/versions                        the versions a signature vouches for
//	HOSTNAME/NAMESPACE/TYPE/VERSION/download/OS/ARCH         the zip's URL, shasum, SHA256SUMS and
//	                                                          its signature's URLs, the signing key
//	HOSTNAME/NAMESPACE/TYPE/VERSION/SHA256SUMS               every platform's zip sha256
//	HOSTNAME/NAMESPACE/TYPE/VERSION/SHA256SUMS.sig           its detached OpenPGP signature
//
// The zips are the network mirror's archives (mirror.go), fetched by digest and checked before a
// byte is sent. SHA256SUMS is made from the digests the verified index names, and signed with the
// organisation's key (Signer) only for a version whose cosign or keyless signature passed the
// policy: a version a warn-mode rule let through, or served without a policy, is not listed. The
// signed pair is kept in the cache, by a name hashed from what it covers, and served from there
// as it is: clients check the signature themselves.
//
// As for modules, the hostname is the first part of the base URL: service discovery names
// registryPath+HOST+"/" for the server's own hostname, and a host block in the CLI configuration
// points another hostname (an origin's, behind an air gap) at its own base.

// registryPath is where the provider registry's base URLs begin.
const registryPath = "/v1/providers/"

// defaultMaxRegistryVersions bounds the versions of one provider the registry checks and lists.
const defaultMaxRegistryVersions = 1000

// RegistryBaseURL is the providers.v1 base URL of one provider hostname on a server at url.
func RegistryBaseURL(url, hostname string) string {
	return trimSlash(url) + registryPath + hostname + "/"
}

// SetRegistryHostname sets the hostname service discovery answers providers.v1 for, once the
// server's URL is known (before Run).
func (s *Server) SetRegistryHostname(h string) { s.registryHost = h }

// routeRegistry adds the provider registry's routes when there is a signing key.
func (s *Server) routeRegistry(mux *http.ServeMux) {
	if s.cfg.Signer == nil || s.cfg.Template == nil {
		return
	}
	base := "GET " + registryPath + "{host}/{ns}/{type}/"
	mux.HandleFunc(base+"versions", s.serveRegistryVersions)
	mux.HandleFunc(base+"{version}/download/{os}/{arch}", s.serveRegistryDownload)
	mux.HandleFunc(base+"{version}/SHA256SUMS", s.serveRegistrySums)
	mux.HandleFunc(base+"{version}/SHA256SUMS.sig", s.serveRegistrySums)
}

// unsignedError is a version that passed the policy without a signature (a warn-mode rule, or no
// policy at all): the registry does not sign for it.
type unsignedError struct {
	addr    manifest.ProviderAddress
	version string
	why     string
}

func (e *unsignedError) Error() string {
	return fmt.Sprintf("%s %s: not signed for: %s", e.addr, e.version, e.why)
}

// registryRequest checks a request's provider address against the include list and the template,
// after each part was validated (parseAddress: hostname, namespace and type as OpenTofu allows
// them, nothing that climbs), and gives a request for it.
func (s *Server) registryRequest(w http.ResponseWriter, r *http.Request) (request, bool) {
	fail := func(err error) (request, bool) {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, err)
		return request{}, false
	}
	host, ns, typ := r.PathValue("host"), r.PathValue("ns"), r.PathValue("type")
	if !utf8.ValidString(host + ns + typ) {
		return fail(errNotProtocol)
	}
	addr, err := parseAddress(host + "/" + ns + "/" + typ)
	if err != nil {
		return fail(err)
	}
	if s.cfg.Include != nil && !s.cfg.Include(addr) {
		return fail(fmt.Errorf("this registry does not serve %s", addr))
	}
	if _, err := s.cfg.Template.Repository(addr); err != nil {
		return fail(err)
	}
	rq := request{addr: addr}
	if v := r.PathValue("version"); v != "" {
		if rq.version, err = canonicalVersion(v); err != nil {
			return fail(err)
		}
	}
	if o, a := r.PathValue("os"), r.PathValue("arch"); o != "" || a != "" {
		p, err := manifest.ParsePlatform(o + "/" + a)
		if err != nil || p.OS != o || p.Arch != a {
			return fail(fmt.Errorf("platform %q/%q: want OS and ARCH such as linux and amd64", clip(o, 32), clip(a, 32)))
		}
		rq.platform = p
	}
	return rq, true
}

// registryContext is a request's registry context, as serveProtocol makes it.
func registryContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), registryTimeout)
	return source.WithoutCache(ctx), cancel
}

// failRegistry answers a refused registry request, dropping the generation after a failure that
// may pass.
func (s *Server) failRegistry(w http.ResponseWriter, r *http.Request, g *generation, err error) {
	rf := classify(err)
	if rf.reason == "registry" || rf.reason == "digest" {
		s.forget(g)
	}
	s.fail(w, r, rf, err)
}

// release is a version the registry serves: its platforms' packages, and the signature check that
// vouched for it.
type release struct {
	platforms []manifest.Platform // sorted
	pkgs      []*cache.Package    // by platform
	auth      cache.Authentication
	// origin, for a version authenticated by its origin's signed SHA256SUMS (origin_keys), is
	// that evidence, passed on as it is instead of serve's own signature.
	origin *originSums
}

// originSums is an origin registry's SHA256SUMS, its signature and the key that made it.
type originSums struct {
	sums, sig []byte
	keyID     string
	key       string
}

// originFrom takes the origin's SHA256SUMS, signature and key from an Authentication by origin
// evidence, or nil when one is missing.
func originFrom(a cache.Authentication) *originSums {
	if a.Evidence == nil || len(a.Keys) != 1 {
		return nil
	}
	o := &originSums{keyID: a.Keys[0]}
	for _, f := range a.Evidence.Files {
		switch {
		case strings.HasSuffix(f.Name, "_SHA256SUMS"):
			o.sums = f.Data
		case strings.HasSuffix(f.Name, "_SHA256SUMS.sig"):
			o.sig = f.Data
		case f.MediaType == "application/pgp-keys":
			o.key = string(f.Data)
		}
	}
	if o.sums == nil || o.sig == nil || o.key == "" {
		return nil
	}
	return o
}

// release resolves and checks one version and reads each platform's package (by the digests its
// verified index names), refusing it unless a signature passed the policy; what it found stands
// for the generation, as the version's resolution and check do.
func (s *Server) release(ctx context.Context, g *generation, rq request) (*release, error) {
	key := rq.addr.String() + " " + rq.version.String()
	g.mu.Lock()
	rel, ok := g.releases[key]
	g.mu.Unlock()
	if ok {
		return rel, nil
	}
	rel, err := s.readRelease(ctx, g, rq)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if g.releases == nil {
		g.releases = map[string]*release{}
	}
	if len(g.releases) < maxReleases {
		g.releases[key] = rel
	}
	g.mu.Unlock()
	return rel, nil
}

// maxReleases bounds the releases a generation remembers (past it, each request reads again).
const maxReleases = 4096

// readRelease is release without the generation's memory.
func (s *Server) readRelease(ctx context.Context, g *generation, rq request) (*release, error) {
	platforms, err := s.platforms(ctx, g, rq)
	if err != nil {
		return nil, err
	}
	if len(platforms) == 0 {
		return nil, fmt.Errorf("%s %s has no platforms: %w", rq.addr, rq.version, os.ErrNotExist)
	}
	platforms = append([]manifest.Platform(nil), platforms...)
	sort.Slice(platforms, func(i, j int) bool { return platforms[i].Less(platforms[j]) })
	rel := &release{platforms: platforms, pkgs: make([]*cache.Package, len(platforms))}
	var eg errgroup.Group
	for i, p := range platforms {
		eg.Go(func() (err error) {
			rel.pkgs[i], err = s.packageFor(ctx, g, rq, p)
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	rel.auth = rel.pkgs[0].Auth // one index, one check
	switch {
	case rel.auth.Method == "gpg" && rel.auth.Warning == "":
		// The origin's own signature, checked against the policy's origin_keys: clients check it
		// too, with the origin's key.
		if rel.origin = originFrom(rel.auth); rel.origin == nil {
			return nil, &unsignedError{rq.addr, rq.version.String(), "its origin evidence lacks SHA256SUMS, its signature or the key"}
		}
	case rel.auth.Method != "cosign":
		return nil, &unsignedError{rq.addr, rq.version.String(), "no signature was checked (serve the registry with --policy or --key)"}
	case rel.auth.Warning != "":
		return nil, &unsignedError{rq.addr, rq.version.String(), "a warn-mode rule let it through unverified: " + clip(rel.auth.Warning, maxReasonLength)}
	}
	return rel, nil
}

// serveRegistryVersions lists the versions whose signatures passed, newest first, with their
// platforms. Protocols are not known (the OCI artifact does not record them): the list is empty,
// which both clients take as "any".
func (s *Server) serveRegistryVersions(w http.ResponseWriter, r *http.Request) {
	rq, ok := s.registryRequest(w, r)
	if !ok {
		return
	}
	g := s.current()
	ctx, cancel := registryContext(r)
	defer cancel()
	list, err := g.versions(ctx, s, rq.addr)
	if err != nil {
		s.failRegistry(w, r, g, err)
		return
	}
	if s.cfg.CatalogRefresh > 0 {
		s.cat.learn(rq.addr)
	}
	list = append(versions.List(nil), list...)
	list.Sort()
	max := s.cfg.MaxRegistryVersions
	if max <= 0 {
		max = defaultMaxRegistryVersions
	}
	if len(list) > max {
		note(ctx, slog.Int("versions_left_out", len(list)-max), slog.String("oldest_listed", list[len(list)-max].String()))
		s.log.Warn("a provider has more versions than the registry lists: only the newest are checked and listed",
			slog.String("provider", rq.addr.String()), slog.Int("versions", len(list)), slog.Int("listed", max))
		list = list[len(list)-max:]
	}
	type platform struct {
		OS   string `json:"os"`
		Arch string `json:"arch"`
	}
	type version struct {
		Version   string     `json:"version"`
		Protocols []string   `json:"protocols"`
		Platforms []platform `json:"platforms"`
	}
	out := make([]*version, len(list))
	hidden := make([]*hiddenVersion, len(list))
	var eg errgroup.Group
	eg.SetLimit(s.cfg.RegistryConcurrency)
	for i, v := range list {
		eg.Go(func() error {
			rel, err := s.release(ctx, g, request{addr: rq.addr, version: v})
			if err != nil {
				hidden[i] = &hiddenVersion{v.String(), clip(err.Error(), maxReasonLength)}
				s.metrics.refused(classify(err).reason)
				return nil
			}
			ver := &version{Version: v.String(), Protocols: []string{}, Platforms: make([]platform, len(rel.platforms))}
			for j, p := range rel.platforms {
				ver.Platforms[j] = platform{p.OS, p.Arch}
			}
			out[i] = ver
			return nil
		})
	}
	eg.Wait()
	doc := struct {
		Versions []*version `json:"versions"`
	}{Versions: []*version{}}
	var left []hiddenVersion
	for i := len(list) - 1; i >= 0; i-- {
		if out[i] != nil {
			doc.Versions = append(doc.Versions, out[i])
		} else {
			left = append(left, *hidden[i])
		}
	}
	if len(left) > 0 {
		note(ctx, slog.Any("hidden", left))
	}
	writeJSON(w, doc)
}

// registryVersionBase is a version's URL below the registry, as a path.
func registryVersionBase(rq request) string {
	return registryPath + rq.addr.String() + "/" + rq.version.String() + "/"
}

// serveRegistryDownload answers one platform's download: the network mirror's archive URL, the
// zip's sha256 (as the verified index names it), the signed SHA256SUMS and the signing key.
func (s *Server) serveRegistryDownload(w http.ResponseWriter, r *http.Request) {
	rq, ok := s.registryRequest(w, r)
	if !ok {
		return
	}
	g := s.current()
	ctx, cancel := registryContext(r)
	defer cancel()
	rel, err := s.release(ctx, g, rq)
	if err != nil {
		s.failRegistry(w, r, g, err)
		return
	}
	i := sort.Search(len(rel.platforms), func(i int) bool { return !rel.platforms[i].Less(rq.platform) })
	if i == len(rel.platforms) || rel.platforms[i] != rq.platform {
		s.failRegistry(w, r, g, fmt.Errorf("%s %s has no package for %s: %w", rq.addr, rq.version, rq.platform, os.ErrNotExist))
		return
	}
	// Signed before the answer names it, so a client that fetches it next finds it.
	if _, _, err := s.signedSums(ctx, rq, rel); err != nil {
		s.failRegistry(w, r, g, err)
		return
	}
	pkg := rel.pkgs[i]
	note(ctx, zipDigestKey(pkg.Zip))
	type key struct {
		KeyID      string `json:"key_id"`
		ASCIIArmor string `json:"ascii_armor"`
	}
	k := key{KeyID: s.cfg.Signer.KeyID, ASCIIArmor: s.cfg.Signer.PublicKey()}
	if rel.origin != nil {
		k = key{KeyID: rel.origin.keyID, ASCIIArmor: rel.origin.key}
	}
	base := registryVersionBase(rq)
	name := archiveName(rq.addr.Type, rq.version.String(), rq.platform)
	doc := map[string]any{
		"protocols":             []string{},
		"os":                    rq.platform.OS,
		"arch":                  rq.platform.Arch,
		"filename":              name,
		"download_url":          "/" + rq.addr.String() + "/" + name,
		"shasums_url":           base + "SHA256SUMS",
		"shasums_signature_url": base + "SHA256SUMS.sig",
		"shasum":                pkg.Zip.Encoded(),
		"signing_keys":          map[string]any{"gpg_public_keys": []key{k}},
	}
	writeJSON(w, doc)
}

// serveRegistrySums sends a version's SHA256SUMS or its signature, from the cache.
func (s *Server) serveRegistrySums(w http.ResponseWriter, r *http.Request) {
	rq, ok := s.registryRequest(w, r)
	if !ok {
		return
	}
	g := s.current()
	ctx, cancel := registryContext(r)
	defer cancel()
	rel, err := s.release(ctx, g, rq)
	var sums, sig []byte
	if err == nil {
		sums, sig, err = s.signedSums(ctx, rq, rel)
	}
	if err != nil {
		s.failRegistry(w, r, g, err)
		return
	}
	body, ctype := sums, "text/plain; charset=utf-8"
	if strings.HasSuffix(r.URL.Path, ".sig") {
		body, ctype = sig, "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(body)
}

// sumsFile gives a version's SHA256SUMS: each platform's zip sha256 (as the verified index names
// it) and file name, in the platforms' order.
func sumsFile(rq request, rel *release) []byte {
	var b bytes.Buffer
	for i, p := range rel.platforms {
		fmt.Fprintf(&b, "%s  %s\n", rel.pkgs[i].Zip.Encoded(), archiveName(rq.addr.Type, rq.version.String(), p))
	}
	return b.Bytes()
}

// maxSumsFile bounds a SHA256SUMS or signature read back from the cache.
const maxSumsFile = 1 << 20

// signedSums gives a version's SHA256SUMS and its signature: for a version its origin's evidence
// authenticated, the origin's; otherwise read from the cache, or made, signed
// and kept there (each file written whole under a temporary name, then renamed into place). The
// cache name is a hash of the provider, version, index digest, key and content, so no part of a
// request becomes a path, and another key or another index signs afresh. Every read, write and
// rename goes through an os.Root on the cache, so a link planted in it leads nowhere outside.
// What is read back is served as it is: clients check the signature themselves.
func (s *Server) signedSums(ctx context.Context, rq request, rel *release) ([]byte, []byte, error) {
	if rel.origin != nil {
		return rel.origin.sums, rel.origin.sig, nil
	}
	sums := sumsFile(rq, rel)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", rq.addr, rq.version, rel.auth.Subject, s.cfg.Signer.fingerprint)
	h.Write(sums)
	name := hex.EncodeToString(h.Sum(nil))
	dir := filepath.Join(sumsDir, name[:2], name)
	sumsPath, sigPath := filepath.Join(dir, "SHA256SUMS"), filepath.Join(dir, "SHA256SUMS.sig")
	root, err := os.OpenRoot(s.cfg.Cache.Dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	read := func() ([]byte, []byte, bool) {
		a, err1 := readSmallFile(root, sumsPath)
		b, err2 := readSmallFile(root, sigPath)
		return a, b, err1 == nil && err2 == nil
	}
	if a, b, ok := read(); ok {
		return a, b, nil
	}
	_, err, _ = s.flight.Do("sums "+name, func() (any, error) {
		if _, _, ok := read(); ok {
			return nil, nil
		}
		sig, err := s.cfg.Signer.sign(sums)
		if err != nil {
			return nil, err
		}
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		tmp, err := s.cfg.Cache.TmpDir()
		if err != nil {
			return nil, err
		}
		// The signature first: a reader finds the pair only once SHA256SUMS is in place.
		for _, f := range []struct {
			path string
			data []byte
		}{{sigPath, sig}, {sumsPath, sums}} {
			if err := writeInto(root, s.cfg.Cache.Dir, tmp, f.path, f.data); err != nil {
				return nil, err
			}
		}
		s.log.Info("signed SHA256SUMS", slog.String("provider", rq.addr.String()), slog.String("version", rq.version.String()),
			slog.String("index", rel.auth.Subject.String()), slog.String("key_id", s.cfg.Signer.KeyID))
		return nil, nil
	})
	if err != nil {
		return nil, nil, err
	}
	a, b, ok := read()
	if !ok {
		return nil, nil, errors.New("the signed SHA256SUMS just written cannot be read back from the cache")
	}
	return a, b, nil
}

// sumsDir is where, below the cache, the registry keeps the SHA256SUMS it signed.
const sumsDir = "registry-sums"

// writeInto writes data to rel (below root, the cache at dir) through a temporary file in tmp (a
// directory below it), renamed into place through root.
func writeInto(root *os.Root, dir, tmp, rel string, data []byte) error {
	f, err := os.CreateTemp(tmp, "sums-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err2 := f.Close(); err == nil {
		err = err2
	}
	var relTmp string
	if err == nil {
		relTmp, err = filepath.Rel(dir, f.Name())
	}
	if err == nil {
		err = root.Rename(relTmp, rel)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cache: writing %s: %w", rel, err)
	}
	return nil
}

// readSmallFile reads a file below root of at most maxSumsFile bytes.
func readSmallFile(root *os.Root, rel string) ([]byte, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(f, maxSumsFile+1))
	if err != nil {
		return nil, err
	}
	if n > maxSumsFile {
		return nil, fmt.Errorf("%s is over %d bytes", rel, maxSumsFile)
	}
	return b.Bytes(), nil
}
