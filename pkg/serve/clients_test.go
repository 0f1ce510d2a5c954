package serve

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/cache"
)

// running is a test server listening on 127.0.0.1 over TLS (the local CA's certificate).
type running struct {
	*testServer
	addr   string
	client *http.Client
	tls    *tls.Config
}

func (f *layoutFixture) run(t *testing.T, limits ClientLimits) *running {
	t.Helper()
	ts := f.server(t, nil, time.Minute)
	ts.limits = limits.withDefaults()
	ts.archives = make(chan struct{}, ts.limits.MaxArchives)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, cfg, err := ensureLocalTLS(filepath.Join(t.TempDir(), "state"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ts.Run(ctx, ln, RunOptions{TLS: cfg, Drain: time.Second}); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	pem, err := os.ReadFile(l.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	return &running{testServer: ts, addr: ln.Addr().String(), tls: tc,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}}
}

// raw opens a TLS connection speaking HTTP/1.1 and sends req as is.
func (r *running) raw(t *testing.T, req string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, err := tls.Dial("tcp", r.addr, &tls.Config{RootCAs: r.tls.RootCAs, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// TestAdmission: a path over the limit gets 414 without being echoed; a GET that declares a body
// and never sends it is answered at once and its connection closed.
func TestAdmission(t *testing.T) {
	r := newLayout(t, map[string]bool{"1.0.0": false}).run(t, ClientLimits{MaxPathLength: 200, ReadTimeout: time.Minute})
	long := base + strings.Repeat("x", 300) + ".json"
	resp, err := r.client.Get("https://" + r.addr + long)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestURITooLong || strings.Contains(string(body), "xxxx") || requestID(body) == "" {
		t.Errorf("a %d-byte path: %d %q, want 414 with a request id and no echo", len(long), resp.StatusCode, body)
	}
	if lines := r.log.logLines(`"path_length":`); len(lines) != 1 || strings.Contains(lines[0], strings.Repeat("x", 257)) {
		t.Errorf("the log does not carry the long path clipped with its length: %v", lines)
	}

	start := time.Now()
	c, br := r.raw(t, "GET "+base+"index.json HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
	c.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET with a declared body: %d, want 400", resp.StatusCode)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection stayed open after a GET with an unsent body")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a GET with an unsent body held the server %v", d)
	}
}

// TestSlowHeadersCutOff: a client that sends half its headers is cut off at the header timeout.
func TestSlowHeadersCutOff(t *testing.T) {
	r := newLayout(t, map[string]bool{"1.0.0": false}).run(t, ClientLimits{HeaderTimeout: time.Second})
	start := time.Now()
	c, br := r.raw(t, "GET "+base+"index.json HTTP/1.1\r\nHost: x\r\n")
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br.ReadByte() // the server closes (or answers 408) once the header timeout passes
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("half-sent headers held the connection %v, want about 1s", d)
	}
}

// TestReserveConnections: with every connection slot held, /healthz still answers on a reserve
// connection, and an archive request there gets 503.
func TestReserveConnections(t *testing.T) {
	r := newLayout(t, map[string]bool{"1.0.0": false}).run(t, ClientLimits{MaxConnections: 2, ReserveConnections: 2, ReserveLife: 3 * time.Second})
	for range 2 { // hold both slots with half-sent requests
		r.raw(t, "GET /healthz HTTP/1.1\r\n")
	}
	time.Sleep(100 * time.Millisecond)
	get := func(path string) int {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: r.tls, DisableKeepAlives: true}}
		resp, err := c.Get("https://" + r.addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with every slot held: %d", code)
	}
	if code := get(base + "index.json"); code != http.StatusServiceUnavailable {
		t.Errorf("index.json on a reserve connection: %d, want 503", code)
	}
}

func TestFitDescriptors(t *testing.T) {
	l := DefaultClientLimits()
	if l.FitDescriptors(1 << 20) {
		t.Error("lowered the limits under a million descriptors")
	}
	for _, n := range []uint64{256, 128, 64} {
		l := DefaultClientLimits()
		if !l.FitDescriptors(n) {
			t.Errorf("%d descriptors: not lowered", n)
		}
		if used := uint64(l.MaxConnections + l.ReserveConnections + l.MaxArchives); used > n || l.MaxConnections < 1 || l.MaxArchives < 1 {
			t.Errorf("%d descriptors: %d connections, %d reserve, %d archives", n, l.MaxConnections, l.ReserveConnections, l.MaxArchives)
		}
	}
}

// TestIncludeRequiredForHostname: a template whose registry host comes from the request needs an
// include list naming hostnames; a * hostname or none is refused, and so is a server without one.
func TestIncludeRequiredForHostname(t *testing.T) {
	tm, err := ParseTemplate("${hostname}/providers/${namespace}/${type}", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, inc := range [][]string{nil, {"*/*/*"}, {"example.com/acme/*", "*/*/*"}} {
		if CheckInclude(tm, inc) == nil {
			t.Errorf("include %v accepted for a ${hostname} registry", inc)
		}
	}
	if err := CheckInclude(tm, []string{"example.com/acme/*", "reg.example.com:5000/*/*"}); err != nil {
		t.Error(err)
	}
	if _, err := New(Config{Template: tm, Cache: nil}); err == nil {
		t.Error("a server without a cache was made")
	}
	other, _ := ParseTemplate("reg.io/${hostname}/${namespace}/${type}", "")
	if err := CheckInclude(other, nil); err != nil {
		t.Errorf("a fixed registry host needs no include: %v", err)
	}
}

// TestIncludeRequiredForHostFromNamespaceOrType: ${namespace} or ${type} in the registry part
// chooses the host as much as ${hostname} does: without --include fixing that part, the template is
// refused (by CheckInclude, which serve runs at start, and by New); a variable only in the path
// needs nothing.
func TestIncludeRequiredForHostFromNamespaceOrType(t *testing.T) {
	for _, tc := range []struct {
		template string
		refused  [][]string
		accepted []string
	}{
		{"${namespace}.example.net/providers/${type}", [][]string{nil, {"example.com/*/*"}, {"example.com/acme/x", "*/*/*"}}, []string{"example.com/acme/*", "example.org/corp/*"}},
		{"${namespace}/${type}", [][]string{nil, {"example.com/*/*"}}, []string{"example.com/acme.example:5000/*"}},
		{"reg-${type}.example.net:443/${namespace}", [][]string{nil, {"example.com/acme/*"}}, []string{"example.com/acme/hello"}},
		{"${hostname}${namespace}/x/${type}", [][]string{{"example.com/*/*"}, {"*/*/*"}}, []string{"example.com/acme/*"}},
	} {
		tm, err := ParseTemplate(tc.template, "")
		if err != nil {
			t.Fatalf("%s: %v", tc.template, err)
		}
		if !tm.HostFromRequest() {
			t.Errorf("%s: the host is not seen to come from the request", tc.template)
		}
		for _, inc := range tc.refused {
			err := CheckInclude(tm, inc)
			if err == nil {
				t.Errorf("%s: include %v accepted", tc.template, inc)
			} else if !strings.Contains(err.Error(), "takes the registry host from the request") {
				t.Errorf("%s: include %v: unclear refusal: %v", tc.template, inc, err)
			}
		}
		if err := CheckInclude(tm, tc.accepted); err != nil {
			t.Errorf("%s: include %v refused: %v", tc.template, tc.accepted, err)
		}
		if _, err := New(Config{Template: tm, Cache: &cache.Cache{}}); err == nil || !strings.Contains(err.Error(), "include") {
			t.Errorf("%s: a server without an include list was made (%v)", tc.template, err)
		}
	}
	path, _ := ParseTemplate("reg.example.net/${hostname}/${namespace}/${type}", "")
	if path.HostFromRequest() || CheckInclude(path, nil) != nil {
		t.Error("variables only in the path were taken for the host")
	}
}
