// Package hostile runs misbehaving registries for tests: one small HTTPS server on 127.0.0.1
// per case, each answering just enough of the distribution API to lead a client into its trap:
// a layer that claims 1 TB and streams without end, an index with thousands of platforms, a tag
// list that pages forever or in a loop, a server that accepts connections and never answers, and
// one that sends a byte every few seconds.
package hostile

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/tests/testkit/testca"
)

// Case is one way of misbehaving.
type Case string

const (
	// HugeLayer serves a version whose zip layer claims 1 TB; the blob streams zeros without end.
	HugeLayer Case = "huge-layer"
	// LyingLayer serves a version whose zip layer claims 1 MiB but streams without end.
	LyingLayer Case = "lying-layer"
	// Oversized serves a version whose zip layer declares 1,000 bytes; the blob streams 50 MB
	// (with no length) and ends.
	Oversized Case = "oversized"
	// WrongBytes serves a version whose zip layer declares 1,000 bytes and a digest; the blob is
	// 1,000 bytes that hash to something else.
	WrongBytes Case = "wrong-bytes"
	// ManyPlatforms serves a version whose index lists Platforms platforms (default 5,000).
	ManyPlatforms Case = "many-platforms"
	// EndlessTags pages its tag list forever, one new tag per page.
	EndlessTags Case = "endless-tags"
	// LoopingTags answers every tag page with the same tags and the same next Link.
	LoopingTags Case = "looping-tags"
	// Silent accepts TCP connections and never sends a byte (not even a TLS handshake).
	Silent Case = "silent"
	// Mute completes TLS and reads requests, and never answers one.
	Mute Case = "mute"
	// Trickle answers the version's manifest request with headers and then one byte every
	// TrickleEvery.
	Trickle Case = "trickle"
)

// Options configure a front.
type Options struct {
	Case Case
	// CA issues the front's certificate; clients trust its File.
	CA *testca.CA
	// Repository and Tag name the version the front pretends to hold (default
	// providers/acme/hello and 1.0.0); Platform is its one platform (default linux_amd64).
	Repository, Tag string
	OS, Arch        string
	// Platforms is how many platforms ManyPlatforms lists (default 5000).
	Platforms int
	// TrickleEvery is Trickle's pace (default 1s).
	TrickleEvery time.Duration
}

// Front is a running misbehaving registry.
type Front struct {
	Host string // 127.0.0.1:PORT

	o        Options
	ln       net.Listener
	srv      *http.Server
	index    []byte
	manifest []byte
	done     chan struct{}

	mu       sync.Mutex
	requests map[string]int // "METHOD kind" -> count
	blobSent atomic.Int64   // bytes of blob bodies written
	conns    atomic.Int64   // connections accepted
}

// Start starts a front and stops it when the test ends.
func Start(t testing.TB, o Options) *Front {
	t.Helper()
	if o.Repository == "" {
		o.Repository = "providers/acme/hello"
	}
	if o.Tag == "" {
		o.Tag = "1.0.0"
	}
	if o.OS == "" {
		o.OS, o.Arch = "linux", "amd64"
	}
	if o.Platforms == 0 {
		o.Platforms = 5000
	}
	if o.TrickleEvery == 0 {
		o.TrickleEvery = time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &Front{Host: ln.Addr().String(), o: o, ln: ln, done: make(chan struct{}), requests: map[string]int{}}
	f.buildGraph()
	t.Cleanup(f.stop)
	if o.Case == Silent {
		go f.holdConnections()
		return f
	}
	certFile, keyFile := o.CA.Issue(t, t.TempDir(), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 10 * time.Second}
	f.srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	go f.srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}}))
	return f
}

func (f *Front) stop() {
	close(f.done)
	if f.srv != nil {
		f.srv.Close()
	}
	f.ln.Close()
}

// holdConnections accepts connections and keeps them open, silent, until the front stops.
func (f *Front) holdConnections() {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.conns.Add(1)
		held = append(held, c)
	}
}

// Requests gives how many requests of a kind ("GET blob", "GET manifest", "GET tags") came in.
func (f *Front) Requests(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[kind]
}

// BlobBytesSent is how many bytes of blob bodies the front wrote.
func (f *Front) BlobBytesSent() int64 { return f.blobSent.Load() }

// Connections is how many connections the front accepted.
func (f *Front) Connections() int64 { return f.conns.Load() }

// zipDigest is the digest the layer claims: nothing the front streams ever matches it.
var zipDigest = digest.FromString("a zip that never ends")

// ZipDigest is the digest the version's zip layer declares.
func ZipDigest() string { return zipDigest.String() }

// buildGraph makes the version's index and platform manifest for the case.
func (f *Front) buildGraph() {
	size := int64(1 << 20)
	switch f.o.Case {
	case HugeLayer:
		size = 1_000_000_000_000
	case Oversized, WrongBytes:
		size = 1000
	}
	name := fmt.Sprintf("terraform-provider-hello_%s_%s_%s.zip", f.o.Tag, f.o.OS, f.o.Arch)
	f.manifest = mustJSON(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"artifactType": "application/vnd.opentofu.provider-target",
		"config":       map[string]any{"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest.FromString("{}"), "size": 2},
		"layers": []any{map[string]any{"mediaType": "archive/zip", "digest": zipDigest, "size": size,
			"annotations": map[string]string{"org.opencontainers.image.title": name}}},
	})
	entry := func(os, arch string) map[string]any {
		return map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": "application/vnd.opentofu.provider-target",
			"digest": digest.FromBytes(f.manifest), "size": len(f.manifest), "platform": map[string]string{"os": os, "architecture": arch}}
	}
	entries := []any{entry(f.o.OS, f.o.Arch)}
	if f.o.Case == ManyPlatforms {
		entries = entries[:0]
		for i := 0; i < f.o.Platforms; i++ {
			entries = append(entries, entry("linux", fmt.Sprintf("arch%d", i)))
		}
	}
	f.index = mustJSON(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"artifactType": "application/vnd.opentofu.provider", "manifests": entries,
	})
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

func (f *Front) count(kind string) {
	f.mu.Lock()
	f.requests[kind]++
	f.mu.Unlock()
}

func (f *Front) serve(w http.ResponseWriter, r *http.Request) {
	prefix := "/v2/" + f.o.Repository + "/"
	rest, inRepo := strings.CutPrefix(r.URL.Path, prefix)
	kind := "other"
	switch {
	case r.URL.Path == "/v2/" || r.URL.Path == "/v2":
		kind = "ping"
	case inRepo && strings.HasPrefix(rest, "manifests/"):
		kind = "manifest"
	case inRepo && strings.HasPrefix(rest, "blobs/"):
		kind = "blob"
	case inRepo && rest == "tags/list":
		kind = "tags"
	}
	f.count(r.Method + " " + kind)
	if f.o.Case == Mute {
		select { // read the request, answer nothing
		case <-r.Context().Done():
		case <-f.done:
		}
		return
	}
	switch kind {
	case "ping":
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.WriteHeader(http.StatusOK)
	case "manifest":
		f.serveManifest(w, r, strings.TrimPrefix(rest, "manifests/"))
	case "blob":
		if strings.HasSuffix(rest, digest.FromString("{}").String()) { // the empty config: honest
			w.Header().Set("Content-Length", "2")
			w.Write([]byte("{}"))
			return
		}
		f.streamForever(w, r)
	case "tags":
		f.serveTags(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *Front) serveManifest(w http.ResponseWriter, r *http.Request, ref string) {
	var body []byte
	mediaType := "application/vnd.oci.image.index.v1+json"
	switch ref {
	case f.o.Tag, digest.FromBytes(f.index).String():
		body = f.index
	case digest.FromBytes(f.manifest).String():
		body, mediaType = f.manifest, "application/vnd.oci.image.manifest.v1+json"
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", digest.FromBytes(body).String())
	if f.o.Case == Trickle && ref == f.o.Tag {
		f.trickle(w, r, body)
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// trickle sends body one byte at a time, TrickleEvery apart.
func (f *Front) trickle(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fl.Flush()
	for _, b := range body {
		select {
		case <-r.Context().Done():
			return
		case <-f.done:
			return
		case <-time.After(f.o.TrickleEvery):
		}
		if _, err := w.Write([]byte{b}); err != nil {
			return
		}
		fl.Flush()
	}
}

// streamForever answers a blob request with zeros until the client goes away, with no length
// (Oversized: 50 MB and no more; WrongBytes: the declared 1,000).
func (f *Front) streamForever(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	limit := int64(-1)
	switch f.o.Case {
	case Oversized:
		limit = 50_000_000
	case WrongBytes:
		limit = 1000
	}
	chunk := make([]byte, 32<<10)
	for sent := int64(0); limit < 0 || sent < limit; {
		if limit >= 0 && limit-sent < int64(len(chunk)) {
			chunk = chunk[:limit-sent]
		}
		select {
		case <-r.Context().Done():
			return
		case <-f.done:
			return
		default:
		}
		n, err := w.Write(chunk)
		f.blobSent.Add(int64(n))
		sent += int64(n)
		if err != nil {
			return
		}
	}
}

// serveTags pages the tag list forever: EndlessTags with a new tag on every page, LoopingTags
// with the same page and the same next Link every time. Other cases list the one version.
func (f *Front) serveTags(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if f.o.Case != EndlessTags && f.o.Case != LoopingTags {
		json.NewEncoder(w).Encode(map[string]any{"name": f.o.Repository, "tags": []string{f.o.Tag}})
		return
	}
	page := 0
	if f.o.Case == EndlessTags {
		fmt.Sscanf(r.URL.Query().Get("last"), "0.0.%d", &page)
		page++
	}
	tags := []string{fmt.Sprintf("0.0.%d", page)}
	if f.o.Case == LoopingTags {
		tags = []string{"1.0.0", "1.1.0"}
	}
	next := fmt.Sprintf("/v2/%s/tags/list?last=%s&n=%d", f.o.Repository, tags[len(tags)-1], len(tags))
	w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", next))
	json.NewEncoder(w).Encode(map[string]any{"name": f.o.Repository, "tags": tags})
}
