package serve

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oprov/oprov/internal/progress"
)

// The catalog's pages: GET / (every provider) and GET /providers/HOST/NAMESPACE/TYPE (one), HTML
// by default and JSON with ?format=json. They render the last round's snapshot (catalog.go) with
// html/template, which escapes every value (all of them may come from a registry); the pages need
// no script and nothing from elsewhere, and their Content-Security-Policy allows none.

//go:embed catalog.html
var catalogHTML string

// catalogTemplate is parsed on the catalog's first request, not at start: most commands never serve it.
var catalogTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("catalog").Funcs(template.FuncMap{
		"size":   progress.HumanBytes,
		"total":  totalSize,
		"when":   func(t time.Time) string { return t.Format("2006-01-02 15:04:05 UTC") },
		"short":  shortDigest,
		"signer": splitSigner,
		"view":   func(p CatalogProvider, detail, policy bool) providerView { return providerView{&p, detail, policy} },
		"mview":  func(m CatalogModule, detail, policy bool) moduleView { return moduleView{&m, detail, policy} },
	}).Parse(catalogHTML))
})

// providerView is one provider as the "provider" template shows it: in detail on its own page.
type providerView struct {
	P      *CatalogProvider
	Detail bool
	Policy bool
}

// moduleView is one module as the "module" template shows it.
type moduleView struct {
	M      *CatalogModule
	Detail bool
	Policy bool
}

// catalogPage is what the template renders: the whole catalog, or one provider of it.
type catalogPage struct {
	Title   string
	Catalog *Catalog
	// One is set on a provider's page, OneModule on a module's.
	One       *CatalogProvider
	OneModule *CatalogModule
}

// serveCatalog answers GET / with the catalog, rendered once per round (the whole catalog can be
// large: a request then costs what sending it does, not what rendering it does).
func (s *Server) serveCatalog(w http.ResponseWriter, r *http.Request) {
	if s.cfg.CatalogRefresh <= 0 {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, fmt.Errorf("the catalog is off (--catalog-refresh 0)"))
		return
	}
	rc := s.rendered()
	if rc.err != nil {
		s.fail(w, r, refusal{http.StatusInternalServerError, "internal"}, rc.err)
		return
	}
	if wantJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(rc.json)
		return
	}
	writeHTML(w, rc.html)
}

// renderedCatalog is one snapshot's whole catalog as HTML and as JSON.
type renderedCatalog struct {
	cat        *Catalog
	html, json []byte
	err        error
}

// rendered gives the last snapshot's rendering, rendering it on the first request after a round.
func (s *Server) rendered() *renderedCatalog {
	c := s.snapshot()
	if rc := s.cat.rendered.Load(); rc != nil && rc.cat == c {
		return rc
	}
	rc := &renderedCatalog{cat: c}
	var buf bytes.Buffer
	if rc.err = catalogTemplate().Execute(&buf, catalogPage{Title: "Providers served", Catalog: c}); rc.err == nil {
		rc.html = buf.Bytes()
		rc.json, rc.err = json.Marshal(c)
	}
	s.cat.rendered.Store(rc)
	return rc
}

// serveProviderPage answers GET /providers/HOST/NAMESPACE/TYPE with one provider of the catalog.
// A protocol path of a provider whose hostname is "providers" has the same shape; its last part
// ends in .json or .zip, which a provider type cannot, and it goes to the protocol.
func (s *Server) serveProviderPage(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.PathValue("type"), ".") {
		s.serveProtocol(w, r)
		return
	}
	if s.cfg.CatalogRefresh <= 0 {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, fmt.Errorf("the catalog is off (--catalog-refresh 0)"))
		return
	}
	addr, err := parseAddress(r.PathValue("host") + "/" + r.PathValue("ns") + "/" + r.PathValue("type"))
	if err != nil {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, err)
		return
	}
	c := s.snapshot()
	var one *CatalogProvider
	for i := range c.Providers {
		if c.Providers[i].Address == addr.String() {
			one = &c.Providers[i]
		}
	}
	if one == nil {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, fmt.Errorf("the catalog holds no %s", addr))
		return
	}
	if wantJSON(r) {
		s.writeCatalogJSON(w, r, one)
		return
	}
	s.renderCatalog(w, r, catalogPage{Title: one.Address, Catalog: c, One: one})
}

// snapshot gives the last round's catalog (before the first, an empty one with Updated zero).
func (s *Server) snapshot() *Catalog { return s.cat.snap.Load() }

func wantJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

func (s *Server) writeCatalogJSON(w http.ResponseWriter, r *http.Request, v any) {
	if err := writeJSON(w, v); err != nil {
		note(r.Context(), slog.String("error", err.Error()))
	}
}

// renderCatalog renders into memory first, so that a template error is a 500, not half a page.
func (s *Server) renderCatalog(w http.ResponseWriter, r *http.Request, page catalogPage) {
	var buf bytes.Buffer
	if err := catalogTemplate().Execute(&buf, page); err != nil {
		s.fail(w, r, refusal{http.StatusInternalServerError, "internal"}, err)
		return
	}
	writeHTML(w, buf.Bytes())
}

// writeHTML sends a rendered page.
func writeHTML(w http.ResponseWriter, page []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	// No script, no frame, nothing fetched from anywhere: only the page's own inline stylesheet.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(page)
}

// totalSize is the size of a version's packages, every platform together.
func totalSize(ps []CatalogPlatform) int64 {
	var n int64
	for _, p := range ps {
		n += p.Size
	}
	return n
}

// signerParts is a signer as the page shows it: a keyless identity's subject, with the rest of
// what its certificate says (issuer, repository, ref, trigger) below it; a key's name alone.
type signerParts struct{ Name, Detail string }

func splitSigner(s string) signerParts {
	if i := strings.Index(s, " (issuer "); i > 0 {
		return signerParts{s[:i], s[i+1:]}
	}
	return signerParts{Name: s}
}

// shortDigest gives a digest's algorithm and its first 12 hex digits.
func shortDigest(d string) string {
	if i := strings.IndexByte(d, ':'); i >= 0 && len(d) > i+13 {
		return d[:i+13]
	}
	return d
}
