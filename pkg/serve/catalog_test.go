package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
)

// TestCatalog: a round reads every version (the signed one served with its signer, platforms and
// sizes; the unsigned one refused with the policy's reason), and the pages (HTML, JSON, one
// provider's) show it from the snapshot alone: with the layout gone, they still answer the same.
func TestCatalog(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true, "1.1.0": false, "0.9.0": true})
	s := f.server(t, f.keyPolicy(t), time.Minute)
	s.cfg.CatalogRefresh = time.Minute
	if code, body := s.get(t, "/?format=json"); code != http.StatusOK || !strings.Contains(string(body), `"updated":"0001-01-01T00:00:00Z"`) {
		t.Fatalf("before the first round: %d %s, want an empty catalog", code, body)
	}
	s.refreshCatalog(context.Background())
	if err := os.RemoveAll(f.dir); err != nil {
		t.Fatal(err)
	}
	code, body := s.get(t, "/?format=json")
	if code != http.StatusOK {
		t.Fatalf("GET /?format=json: %d %s", code, body)
	}
	var c Catalog
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Providers) != 1 || c.Providers[0].Address != "example.com/acme/hello" || !c.Policy {
		t.Fatalf("catalog %s, want example.com/acme/hello under a policy", body)
	}
	p := c.Providers[0]
	if len(p.Versions) != 2 || p.Versions[0].Version != "1.0.0" || p.Versions[1].Version != "0.9.0" {
		t.Fatalf("versions %+v, want 1.0.0 then 0.9.0", p.Versions)
	}
	v := p.Versions[0]
	if len(v.SignedBy) != 1 || !strings.HasSuffix(f.pubKey, "/"+v.SignedBy[0]) || v.Index != f.index["1.0.0"] {
		t.Errorf("1.0.0 signed by %q (index %s), want the key's file name %s (index %s)", v.SignedBy, v.Index, f.pubKey, f.index["1.0.0"])
	}
	if len(v.Platforms) != len(testPlatforms) {
		t.Fatalf("1.0.0 platforms %+v, want %d", v.Platforms, len(testPlatforms))
	}
	for _, cp := range v.Platforms {
		pl, _ := manifest.ParsePlatform(cp.Platform)
		if h := f.hashes["1.0.0"][pl]; cp.Size <= 0 || "zh:"+strings.TrimPrefix(cp.Zip, "sha256:") != h.ZH || cp.Filename != archiveName("hello", "1.0.0", pl) {
			t.Errorf("platform %+v, want %s, its zip %s and a size", cp, archiveName("hello", "1.0.0", pl), h.ZH)
		}
	}
	if len(p.Refused) != 1 || p.Refused[0].Version != "1.1.0" || p.Refused[0].Reason != "policy" || p.Refused[0].Detail == "" {
		t.Fatalf("refused %+v, want 1.1.0 for the policy, with the reason", p.Refused)
	}
	page := pageText(t, s, "/")
	for _, want := range []string{"example.com/acme/hello", "1.0.0", "0.9.0", "linux_amd64", v.SignedBy[0], "1.1.0", p.Refused[0].Detail} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	one := pageText(t, s, "/providers/example.com/acme/hello")
	if !strings.Contains(one, archiveName("hello", "1.0.0", testPlatforms[0])) {
		t.Errorf("the provider's page lacks the file names:\n%s", one)
	}
	for path, want := range map[string]int{
		"/providers/example.com/acme/other":             http.StatusNotFound,
		"/providers/example.com/acme/hello?format=json": http.StatusOK,
		"/providers/x/y/index.json":                     http.StatusNotFound, // the protocol's: this mirror serves no x/y
	} {
		if code, body := s.get(t, path); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
}

// TestCatalogEscapes: every value from a registry is shown as text, never as markup.
func TestCatalogEscapes(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": false})
	s := f.server(t, nil, time.Minute)
	s.cfg.CatalogRefresh = time.Minute
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	s.cat.snap.Store(&Catalog{Updated: time.Now(), Providers: []CatalogProvider{{
		Address: "example.com/acme/hello", Hostname: "example.com", Namespace: "acme", Type: "hello",
		Versions: []CatalogVersion{{Version: "1.0.0", SignedBy: []string{evil}, Platforms: []CatalogPlatform{{Platform: "linux_amd64", Filename: evil, Size: 1}}}},
		Refused:  []RefusedVersion{{Version: "0.1.0", Reason: "policy", Detail: evil}},
	}}})
	for _, path := range []string{"/", "/providers/example.com/acme/hello"} {
		code, body := s.get(t, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		doc, err := html.Parse(strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		var elements []string
		walk(doc, func(n *html.Node) {
			if n.Type == html.ElementNode && (n.Data == "script" || n.Data == "img") {
				elements = append(elements, n.Data)
			}
		})
		if len(elements) > 0 || !strings.Contains(text(doc), evil) {
			t.Errorf("GET %s: elements %v, text %q; want the value as text only", path, elements, text(doc))
		}
	}
}

// TestCatalogKnowsWhatClientsAsk: a provider joins the catalog once a client's index.json listed
// it, up to the bound.
func TestCatalogKnowsWhatClientsAsk(t *testing.T) {
	c := newCatalogState(Config{Template: &Template{}})
	for i := 0; i < maxCatalogProviders+10; i++ {
		c.learn(manifest.ProviderAddress{Hostname: "example.com", Namespace: "acme", Type: fmt.Sprintf("p%d", i)})
	}
	addrs, full := c.addresses()
	if len(addrs) != maxCatalogProviders || !full {
		t.Fatalf("%d providers known (full %v), want %d and full", len(addrs), full, maxCatalogProviders)
	}
}

func pageText(t *testing.T, s *testServer, path string) string {
	t.Helper()
	code, body := s.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	doc, err := html.Parse(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	return text(doc)
}

func walk(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

// text is a document's text, its stylesheet left out.
func text(doc *html.Node) string {
	var b strings.Builder
	walk(doc, func(n *html.Node) {
		if n.Type == html.TextNode && (n.Parent == nil || n.Parent.Data != "style") {
			b.WriteString(n.Data)
		}
	})
	return b.String()
}

// TestCatalogLearnsFromIndex: a provider whose index.json a client got joins the catalog, and
// the round is woken; one the server does not serve does not.
func TestCatalogLearnsFromIndex(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": false})
	s := f.server(t, nil, time.Minute)
	s.cfg.CatalogRefresh = time.Minute
	s.cat.known = map[string]manifest.ProviderAddress{} // as a template with variables starts
	s.get(t, "/example.com/acme/other/index.json")
	if addrs, _ := s.cat.addresses(); len(addrs) != 0 {
		t.Fatalf("a provider not served joined the catalog: %v", addrs)
	}
	indexVersions(t, s)
	if addrs, _ := s.cat.addresses(); len(addrs) != 1 || addrs[0].String() != "example.com/acme/hello" {
		t.Fatalf("catalog knows %v, want example.com/acme/hello", addrs)
	}
	select {
	case <-s.cat.kick:
	default:
		t.Error("the round was not woken")
	}
}

// bigCatalog is 50 providers with 20 versions of 6 platforms each (and 5 refused).
func bigCatalog() *Catalog {
	c := &Catalog{Updated: time.Now(), Policy: true}
	for i := range 50 {
		p := CatalogProvider{Address: fmt.Sprintf("example.com/acme/p%d", i), Hostname: "example.com", Namespace: "acme", Type: fmt.Sprintf("p%d", i)}
		for v := range 20 {
			cv := CatalogVersion{Version: fmt.Sprintf("1.%d.0", v), SignedBy: []string{"https://github.com/acme/providers/.github/workflows/release.yml@refs/tags/v1.0.0 (issuer https://token.actions.githubusercontent.com)"}}
			for _, pl := range []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64", "windows_amd64", "windows_arm64"} {
				cv.Platforms = append(cv.Platforms, CatalogPlatform{Platform: pl, Filename: "terraform-provider-x.zip", Size: 6 << 20, Zip: "sha256:0123456789abcdef"})
			}
			p.Versions = append(p.Versions, cv)
		}
		for v := range 5 {
			p.Refused = append(p.Refused, RefusedVersion{Version: fmt.Sprintf("0.%d.0", v), Reason: "policy", Detail: "not signed"})
		}
		c.Providers = append(c.Providers, p)
	}
	return c
}

// BenchmarkCatalogRender renders the big catalog, what the first GET / after a round does.
func BenchmarkCatalogRender(b *testing.B) {
	c := bigCatalog()
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := catalogTemplate().Execute(&buf, catalogPage{Title: "Providers served", Catalog: c}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "page-bytes")
}

// BenchmarkCatalogRequest answers GET / for the big catalog through the handler, as every request
// after the first of a round does (the rendering kept).
func BenchmarkCatalogRequest(b *testing.B) {
	tmpl, _ := ParseTemplate(oci.LayoutScheme+b.TempDir(), "example.com/acme/hello")
	c, _ := cache.Open(b.TempDir())
	defer c.Close()
	s, _ := New(Config{Template: tmpl, Cache: c, CatalogRefresh: time.Minute})
	s.cat.snap.Store(bigCatalog())
	h := s.Handler()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}
