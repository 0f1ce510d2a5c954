package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/source"
)

// registryTimeout bounds the registry work one request waits for.
const registryTimeout = 2 * time.Minute

// serveProtocol answers index.json, VERSION.json and archive requests.
func (s *Server) serveProtocol(w http.ResponseWriter, r *http.Request) {
	rq, err := parsePath(r.URL.Path)
	if err != nil {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, err)
		return
	}
	if s.cfg.Include != nil && !s.cfg.Include(rq.addr) {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, fmt.Errorf("this mirror does not serve %s", rq.addr))
		return
	}
	if _, err := s.cfg.Template.Repository(rq.addr); err != nil {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, err)
		return
	}
	g := s.current()
	// What a generation learns (a listing, a resolved and verified version) is shared by every
	// request after this one, so the work is not cut short when this client leaves; it is bounded
	// in time instead. Tags are resolved (once per generation), never read from a stale record.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), registryTimeout)
	defer cancel()
	ctx = source.WithoutCache(ctx)
	switch rq.kind {
	case docIndex:
		err = s.serveIndex(ctx, w, g, rq)
	case docVersion:
		err = s.serveVersion(ctx, w, g, rq)
	case docArchive:
		err = s.serveArchive(ctx, w, r, g, rq)
	}
	if err != nil {
		rf := classify(err)
		if rf.reason == "registry" || rf.reason == "digest" {
			s.forget(g) // may pass: ask again next time
		}
		s.fail(w, r, rf, err)
	}
}

// reasons are what a client is told about a refusal: never its input, never the registry's words
// or the server's layout (those go to the access log, under the same request id).
var reasons = map[string]string{
	"not_found":     "no such provider, version or archive here",
	"not_module":    "no such module or version here",
	"policy":        "no such provider, version or archive here",
	"unsigned":      "no such provider, version or archive here",
	"digest":        "the registry sent bytes that do not match their digest",
	"h1":            "the package does not match the hash its registry states",
	"registry":      "the registry could not be read",
	"too_large":     "the package is over this server's size limit",
	"path_too_long": "request path too long",
	"busy":          "server busy, retry later",
	"body_on_get":   "a GET or HEAD request may not carry a body",
}

// fail answers with the status, a short reason and the request id, and puts the details in the
// access log under that id.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, rf refusal, err error) {
	s.metrics.refused(rf.reason)
	id := ""
	if e, ok := r.Context().Value(entryKey{}).(*entry); ok {
		id = e.id
	}
	note(r.Context(), slog.String("refused", rf.reason), slog.String("error", clip(err.Error(), 4*maxLoggedPath)))
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Request-Id", id)
	h.Del("ETag")
	h.Del("Content-Length")
	w.WriteHeader(rf.status)
	reason := reasons[rf.reason]
	if reason == "" {
		reason = strings.ToLower(http.StatusText(rf.status))
	}
	fmt.Fprintf(w, "%d %s\nrequest id: %s\n", rf.status, reason, id)
}

func writeJSON(w http.ResponseWriter, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache") // versions come and go with tags and signatures
	_, err = w.Write(data)
	return err
}

// serveIndex lists the versions whose tags parse, and under a policy only those that pass it
// (each version is resolved and its signature checked; refusals are logged with their reason).
func (s *Server) serveIndex(ctx context.Context, w http.ResponseWriter, g *generation, rq request) error {
	list, err := g.versions(ctx, s, rq.addr)
	if err != nil {
		return err
	}
	if s.cfg.CatalogRefresh > 0 {
		s.cat.learn(rq.addr)
	}
	ok := make([]bool, len(list))
	if s.cfg.Policy != nil {
		hidden := s.screen(ctx, g, rq, list, ok)
		if len(hidden) > 0 {
			note(ctx, slog.Any("hidden", hidden))
		}
	} else {
		for i := range ok {
			ok[i] = true
		}
	}
	out := struct {
		Versions map[string]struct{} `json:"versions"`
	}{Versions: map[string]struct{}{}}
	for i, v := range list {
		if ok[i] {
			out.Versions[v.String()] = struct{}{}
		}
	}
	return writeJSON(w, out)
}

// hiddenVersion is a version left out of index.json, and why.
type hiddenVersion struct {
	Version string `json:"version"`
	Reason  string `json:"reason"`
}

// screen resolves and checks every version under the policy, setting ok for those that pass.
func (s *Server) screen(ctx context.Context, g *generation, rq request, list versions.List, ok []bool) []hiddenVersion {
	reasons := make([]string, len(list))
	var eg errgroup.Group
	for i, v := range list {
		eg.Go(func() error {
			err := s.registry(ctx, func() error {
				_, err := g.src.Platforms(ctx, rq.addr, v)
				return err
			})
			if err != nil {
				reasons[i] = err.Error()
				s.metrics.refused(classify(err).reason)
			} else {
				ok[i] = true
			}
			return nil
		})
	}
	eg.Wait()
	var hidden []hiddenVersion
	for i, v := range list {
		if !ok[i] {
			hidden = append(hidden, hiddenVersion{v.String(), reasons[i]})
		}
	}
	return hidden
}

// archive is one platform's entry in VERSION.json.
type archive struct {
	URL    string   `json:"url"`
	Hashes []string `json:"hashes"`
}

// serveVersion gives each platform's archive URL (relative to this document) and its hashes:
// zh: (the zip's sha256) and h1: (the unpacked package's, what lock files record). A client
// accepts an archive that matches any of them; Terraform stops at the first that matches, so zh:
// comes first: a sha256 of the download is cheaper than unpacking it for h1:. Computing an h1:
// needs the zip, so a cold VERSION.json fills the cache.
func (s *Server) serveVersion(ctx context.Context, w http.ResponseWriter, g *generation, rq request) error {
	platforms, err := s.platforms(ctx, g, rq)
	if err != nil {
		return err
	}
	archives := make([]archive, len(platforms))
	var eg errgroup.Group
	for i, p := range platforms {
		eg.Go(func() error {
			pkg, err := s.packageFor(ctx, g, rq, p)
			if err != nil {
				return err
			}
			h1, err := s.h1(ctx, pkg)
			if err != nil {
				return err
			}
			archives[i] = archive{URL: archiveName(rq.addr.Type, rq.version.String(), p), Hashes: []string{"zh:" + pkg.Zip.Encoded(), h1}}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	out := struct {
		Archives map[string]archive `json:"archives"`
	}{Archives: map[string]archive{}}
	for i, p := range platforms {
		out.Archives[p.String()] = archives[i]
	}
	return writeJSON(w, out)
}

// packageFor gives one platform's package of the requested version (its manifest is fetched once
// per generation, by the digest the verified index names).
func (s *Server) packageFor(ctx context.Context, g *generation, rq request, p manifest.Platform) (*cache.Package, error) {
	var pkg *cache.Package
	err := s.registry(ctx, func() (err error) {
		pkg, err = g.src.PackageFor(ctx, rq.addr, rq.version, p)
		return err
	})
	return pkg, err
}

// platforms resolves the requested version (once per generation; under a policy, its signature is
// checked) and gives the platforms its index has.
func (s *Server) platforms(ctx context.Context, g *generation, rq request) ([]manifest.Platform, error) {
	var platforms []manifest.Platform
	err := s.registry(ctx, func() (err error) {
		platforms, err = g.src.Platforms(ctx, rq.addr, rq.version)
		return err
	})
	return platforms, err
}

// serveArchive sends one platform's zip from the cache, fetching and checking it first when the
// cache lacks it: a client never gets a byte that has not been checked against its digest.
func (s *Server) serveArchive(ctx context.Context, w http.ResponseWriter, r *http.Request, g *generation, rq request) error {
	platforms, err := s.platforms(ctx, g, rq)
	if err != nil {
		return err
	}
	if !hasPlatform(platforms, rq.platform) {
		return fmt.Errorf("%s %s has no package for %s: %w", rq.addr, rq.version, rq.platform, os.ErrNotExist)
	}
	pkg, err := s.packageFor(ctx, g, rq, rq.platform)
	if err != nil {
		return err
	}
	note(ctx, zipDigestKey(pkg.Zip))
	limits := s.cfg.Registry.Bounds()
	if err := limits.CheckBlobSize("the "+pkg.Filename+" package", pkg.Size); err != nil {
		return err
	}
	z, err := s.ensureZip(ctx, pkg, false)
	if err != nil {
		return err
	}
	result := map[bool]string{false: "hit", true: "miss"}[z.Fetched]
	s.metrics.archiveCache(result)
	note(ctx, slog.String("cache", result))
	release, ok := s.archiveSlot(r.Context())
	if !ok {
		w.Header().Set("Retry-After", "1")
		return errBusy
	}
	defer release()
	f, err := os.Open(z.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	// A zip cached before the limit was lowered, or fetched without a known size.
	if err := limits.CheckBlobSize("the "+pkg.Filename+" package", st.Size()); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("ETag", `"`+pkg.Zip.String()+`"`)
	http.ServeContent(w, r, "", st.ModTime(), f)
	return nil
}

func hasPlatform(list []manifest.Platform, p manifest.Platform) bool {
	for _, q := range list {
		if q == p {
			return true
		}
	}
	return false
}
