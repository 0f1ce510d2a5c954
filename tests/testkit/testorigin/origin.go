// Package testorigin serves a Provider Registry Protocol v1 origin over TLS on 127.0.0.1 for
// tests: discovery, versions, download metadata and the files, from release zips signed with a
// test OpenPGP key. Faults can be switched on to prove that what consumes it checks what it
// should and copes with what a real origin does on a bad day (errors, cut connections, stalls,
// tokens, protocols it cannot launch). It lives under internal/ so unit tests anywhere in the
// module can use it; it needs no external program.
package testorigin

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/tests/testkit/testca"
)

// Faults make the origin misbehave. The counters (FailNext, DropNext, TruncateNext, StallNext)
// count down as requests use them up, on either server.
type Faults struct {
	BadSignature bool // serve a signature that does not match SHA256SUMS
	TamperZip    bool // serve zips whose bytes differ from SHA256SUMS
	SwapKey      bool // list another key than the one that signed SHA256SUMS

	// FailNext answers the next FailNext requests with FailStatus (503 when 0), with a
	// Retry-After header when RetryAfter is set.
	FailNext   int
	FailStatus int
	RetryAfter string
	// DropNext closes the connection of the next DropNext requests without answering.
	DropNext int
	// TruncateNext sends the headers and half the body of the next TruncateNext answers, then
	// closes the connection.
	TruncateNext int
	// StallNext holds the next StallNext requests for 5 seconds (or until the client gives up)
	// before answering 503.
	StallNext int

	// Token, when set, must come as "Authorization: Bearer TOKEN" on every request to the
	// origin's own host; without it the origin answers 401.
	Token string
	// Protocols replaces, per version, the plugin protocols the origin advertises (default
	// 5.0 and 6.0) in the versions and download answers; DownloadProtocols, in the download
	// answers only.
	Protocols         map[string][]string
	DownloadProtocols map[string][]string
	// FilesElsewhere names the files by absolute URLs on a second server with another host name
	// (127.0.0.1 where the origin is localhost); RedirectFiles keeps the origin's own URLs but
	// answers them with a redirect there.
	FilesElsewhere bool
	RedirectFiles  bool
	// NoContentLength sends every answer without a Content-Length (chunked), as some servers do.
	NoContentLength bool
}

// Request is one request either server received.
type Request struct {
	Host          string
	Path          string
	Authorization string
}

// Origin is a running test origin.
type Origin struct {
	Host      string // localhost:PORT
	FilesHost string // 127.0.0.1:PORT of the second server (see Faults.FilesElsewhere)
	Namespace string
	Type      string
	Version   string // the first version served
	Key       *openpgp.Entity
	mu        sync.Mutex
	faults    Faults
	versions  []string            // in the order they were added
	platforms map[string][]string // version -> OS_ARCH
	files     map[string][]byte   // file name -> content
	requests  []Request
	srv       *httptest.Server
	filesSrv  *httptest.Server
	other     *openpgp.Entity
	armored   map[*openpgp.Entity]string
}

// SetFaults changes how the origin misbehaves from now on.
func (o *Origin) SetFaults(f Faults) {
	o.mu.Lock()
	o.faults = f
	o.mu.Unlock()
}

// Requests lists the requests received so far, in order.
func (o *Origin) Requests() []Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Request(nil), o.requests...)
}

// NewKey makes an OpenPGP key for signing releases.
func NewKey(t testing.TB, name string) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity(name, "test", name+"@example.com", &packet.Config{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Armor gives an entity's public key, ASCII-armored.
func Armor(t testing.TB, e *openpgp.Entity) string {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.String()
}

// KeyID is an entity's key ID as the protocol writes it.
func KeyID(e *openpgp.Entity) string { return fmt.Sprintf("%016X", e.PrimaryKey.KeyId) }

// FakeRelease writes a small release of TYPE VERSION into a new directory: one zip per OS_ARCH
// platform holding a stand-in executable, and SHA256SUMS. It is enough for anything that moves
// releases around without running them.
func FakeRelease(t testing.TB, typ, version string, platforms ...string) string {
	t.Helper()
	bin, out := t.TempDir(), t.TempDir()
	var ps []manifest.Platform
	for _, s := range platforms {
		p, err := manifest.ParsePlatform(s)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		exe := filepath.Join(bin, s, providerrelease.ExecutableName(typ, version, p.OS))
		if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, []byte("#!/bin/sh\necho "+typ+" "+version+" "+s+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := providerrelease.PackageBinaries(bin, providerrelease.PackageOptions{Type: typ, Version: version, Platforms: ps, OutDir: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Start serves the release in dist (zips of NAMESPACE/TYPE VERSION and their SHA256SUMS) with a
// certificate from ca for localhost and 127.0.0.1.
func Start(t testing.TB, ca *testca.CA, dist, namespace, typ, version string) *Origin {
	t.Helper()
	o := &Origin{Namespace: namespace, Type: typ, Version: version, files: map[string][]byte{},
		platforms: map[string][]string{}, Key: NewKey(t, "oprov origin"), other: NewKey(t, "someone else")}
	o.armored = map[*openpgp.Entity]string{o.Key: Armor(t, o.Key), o.other: Armor(t, o.other)}
	o.AddVersion(t, dist, version)

	certFile, keyFile := ca.Issue(t, t.TempDir(), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	start := func(h http.HandlerFunc) *httptest.Server {
		s := httptest.NewUnstartedServer(h)
		s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		s.StartTLS()
		t.Cleanup(s.Close)
		return s
	}
	o.srv = start(func(w http.ResponseWriter, r *http.Request) { o.serve(w, r, true) })
	o.filesSrv = start(func(w http.ResponseWriter, r *http.Request) { o.serve(w, r, false) })
	o.Host = strings.Replace(strings.TrimPrefix(o.srv.URL, "https://"), "127.0.0.1", "localhost", 1)
	o.FilesHost = strings.TrimPrefix(o.filesSrv.URL, "https://")
	return o
}

// AddVersion serves one more version of the provider from dist, signed with the origin's key.
func (o *Origin) AddVersion(t testing.TB, dist, version string) {
	t.Helper()
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "terraform-provider-" + o.Type + "_" + version + "_"
	files := map[string][]byte{}
	var platforms []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dist, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
		if p, ok := strings.CutPrefix(e.Name(), prefix); ok && strings.HasSuffix(p, ".zip") {
			platforms = append(platforms, strings.TrimSuffix(p, ".zip"))
		}
	}
	sums := files[prefix+"SHA256SUMS"]
	if sums == nil {
		t.Fatalf("%s has no %sSHA256SUMS", dist, prefix)
	}
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, o.Key, bytes.NewReader(sums), nil); err != nil {
		t.Fatal(err)
	}
	files[prefix+"SHA256SUMS.sig"] = sig.Bytes()
	o.mu.Lock()
	defer o.mu.Unlock()
	for n, d := range files {
		o.files[n] = d
	}
	o.versions = append(o.versions, version)
	o.platforms[version] = platforms
}

// Address is the provider's source address on this origin.
func (o *Origin) Address() string { return o.Host + "/" + o.Namespace + "/" + o.Type }

// answer is what the origin says to one request, before faults that cut it short.
type answer struct {
	status   int
	json     any    // a JSON body, or
	body     []byte // a raw one
	location string // for redirects
}

func (o *Origin) serve(w http.ResponseWriter, r *http.Request, isOrigin bool) {
	o.mu.Lock()
	o.requests = append(o.requests, Request{Host: r.Host, Path: r.URL.Path, Authorization: r.Header.Get("Authorization")})
	f := o.faults
	injected := o.takeFault()
	o.mu.Unlock()
	if o.inject(w, r, injected, f) {
		return
	}
	a := o.route(r, isOrigin, f)
	body := a.body
	if a.json != nil {
		body, _ = json.Marshal(a.json)
		w.Header().Set("Content-Type", "application/json")
	}
	if a.location != "" {
		w.Header().Set("Location", a.location)
	}
	if injected == "truncate" {
		truncate(w, body)
		return
	}
	if !f.NoContentLength {
		w.Header().Set("Content-Length", fmt.Sprint(len(body))) // as real origins and CDNs announce sizes
	}
	w.WriteHeader(a.status)
	if f.NoContentLength && len(body) > 1 {
		w.Write(body[:1]) // the first byte goes out alone, so the answer must be chunked
		w.(http.Flusher).Flush()
		body = body[1:]
	}
	w.Write(body)
}

// takeFault uses up one counted fault, if any is left, and names it. o.mu is held.
func (o *Origin) takeFault() string {
	for _, c := range []struct {
		n    *int
		name string
	}{{&o.faults.StallNext, "stall"}, {&o.faults.DropNext, "drop"}, {&o.faults.FailNext, "fail"}, {&o.faults.TruncateNext, "truncate"}} {
		if *c.n > 0 {
			*c.n--
			return c.name
		}
	}
	return ""
}

// inject carries out a fault that answers instead of the origin, and reports whether it did.
func (o *Origin) inject(w http.ResponseWriter, r *http.Request, fault string, f Faults) bool {
	switch fault {
	case "stall":
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	case "drop":
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	case "fail":
		status := f.FailStatus
		if status == 0 {
			status = http.StatusServiceUnavailable
		}
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		http.Error(w, http.StatusText(status), status)
	default:
		return false
	}
	return true
}

// truncate announces the whole body, sends half of it, and cuts the connection.
func truncate(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body[:len(body)/2])
	w.(http.Flusher).Flush()
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.Close()
	}
}

func (o *Origin) route(r *http.Request, isOrigin bool, f Faults) answer {
	base := "/v1/providers/" + o.Namespace + "/" + o.Type + "/"
	p := r.URL.Path
	switch {
	case !isOrigin:
		if name, ok := strings.CutPrefix(p, "/files/"); ok {
			return o.file(name, f)
		}
	case f.Token != "" && r.Header.Get("Authorization") != "Bearer "+f.Token:
		return answer{status: http.StatusUnauthorized, body: []byte("a token is required\n")}
	case p == "/.well-known/terraform.json":
		return answer{status: http.StatusOK, json: map[string]string{"providers.v1": "/v1/providers/"}}
	case p == base+"versions":
		return answer{status: http.StatusOK, json: o.versionsDoc(f)}
	case strings.HasPrefix(p, base):
		if a, ok := o.download(strings.TrimPrefix(p, base), f); ok {
			return a
		}
	case strings.HasPrefix(p, "/files/") && f.RedirectFiles:
		return answer{status: http.StatusFound, location: "https://" + o.FilesHost + p}
	case strings.HasPrefix(p, "/files/"):
		return o.file(strings.TrimPrefix(p, "/files/"), f)
	}
	return answer{status: http.StatusNotFound, body: []byte("404 page not found\n")}
}

func (o *Origin) protocols(f Faults, version string, download bool) []string {
	if ps, ok := f.DownloadProtocols[version]; ok && download {
		return ps
	}
	if ps, ok := f.Protocols[version]; ok {
		return ps
	}
	return []string{"5.0", "6.0"}
}

func (o *Origin) versionsDoc(f Faults) map[string]any {
	o.mu.Lock()
	defer o.mu.Unlock()
	var vs []any
	for _, v := range o.versions {
		var ps []map[string]string
		for _, p := range o.platforms[v] {
			os, arch, _ := strings.Cut(p, "_")
			ps = append(ps, map[string]string{"os": os, "arch": arch})
		}
		vs = append(vs, map[string]any{"version": v, "protocols": o.protocols(f, v, false), "platforms": ps})
	}
	return map[string]any{"versions": vs}
}

// download answers VERSION/download/OS/ARCH.
func (o *Origin) download(rest string, f Faults) (answer, bool) {
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[1] != "download" {
		return answer{}, false
	}
	version := parts[0]
	prefix := "terraform-provider-" + o.Type + "_" + version + "_"
	name := prefix + parts[2] + "_" + parts[3] + ".zip"
	o.mu.Lock()
	_, ok := o.files[name]
	sums := o.files[prefix+"SHA256SUMS"]
	o.mu.Unlock()
	if !ok {
		return answer{}, false
	}
	key := o.Key
	if f.SwapKey {
		key = o.other
	}
	files := "/files/" // relative: resolved against this answer's URL
	if f.FilesElsewhere {
		files = "https://" + o.FilesHost + "/files/"
	}
	return answer{status: http.StatusOK, json: map[string]any{
		"protocols": o.protocols(f, version, true), "os": parts[2], "arch": parts[3], "filename": name,
		"download_url":          files + name,
		"shasums_url":           files + prefix + "SHA256SUMS",
		"shasums_signature_url": files + prefix + "SHA256SUMS.sig",
		"shasum":                sumOf(sums, name),
		"signing_keys": map[string]any{"gpg_public_keys": []any{map[string]string{
			"key_id": KeyID(key), "ascii_armor": o.armored[key],
		}}},
	}}, true
}

func (o *Origin) file(name string, f Faults) answer {
	o.mu.Lock()
	data, ok := o.files[name]
	o.mu.Unlock()
	if !ok {
		return answer{status: http.StatusNotFound, body: []byte("404 page not found\n")}
	}
	switch {
	case f.BadSignature && strings.HasSuffix(name, ".sig"):
		data = append([]byte{}, data...)
		data[len(data)-1] ^= 0xff
	case f.TamperZip && strings.HasSuffix(name, ".zip"):
		data = append(append([]byte{}, data...), []byte("tampered")...)
	}
	return answer{status: http.StatusOK, body: data}
}

func sumOf(sums []byte, name string) string {
	for _, line := range strings.Split(string(sums), "\n") {
		if h, n, ok := strings.Cut(line, "  "); ok && n == name {
			return h
		}
	}
	return ""
}

// Stop shuts the origin (and its file server) down, so a test can show nothing reaches it.
func (o *Origin) Stop() {
	o.srv.Close()
	o.filesSrv.Close()
}
