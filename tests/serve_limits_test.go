package tests

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/throttle"
)

// countingListener accepts connections on 127.0.0.1 and counts them: the server must make none
// for a refused request.
type countingListener struct {
	ln net.Listener
	n  atomic.Int64
}

func countConnections(t *testing.T, addr string) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil
	}
	c := &countingListener{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return c
}

// TestServeNoSSRF: a template whose registry host is ${hostname} needs --include naming hosts (a
// server without one, or with a * host, does not start); requests for a host outside it, or for an
// included host with a port the pattern does not name, are refused with a 404 that says nothing
// of the target, and no connection is made. A server whose include names the port does connect,
// so the listener can count.
func TestServeNoSSRF(t *testing.T) {
	tmpl := "${hostname}/providers/${namespace}/${type}"
	for _, inc := range [][]string{nil, {"--include", "*/*/*"}} {
		r := oprov(t, nil, append([]string{"serve", tmpl, "--listen", "127.0.0.1:0", "--state-dir", t.TempDir()}, inc...)...)
		if r.Code == 0 || !strings.Contains(r.Stderr, "--include") {
			t.Errorf("serve %s %v: exit %d, want a refusal naming --include\n%s", tmpl, inc, r.Code, r.Stderr)
		}
	}
	target := countConnections(t, "127.0.0.1:0")
	port := target.ln.Addr().(*net.TCPAddr).Port
	portS := strings.TrimPrefix(target.ln.Addr().String(), "127.0.0.1:")
	noPort := countConnections(t, "127.0.0.1:443") // the port a hostname without one names
	cache := filepath.Join(t.TempDir(), "cache")
	s := startServe(t, nil, false, tmpl, "--include", "example.com/acme/*", "--include", "localhost:1/acme/*", "--cache-dir", cache, "--stall-timeout", "3s")
	paths := []string{
		"/127.0.0.1:" + portS + "/acme/hello/index.json", // outside --include, with a port
		"/127.0.0.1/acme/hello/index.json",               // outside --include, without one
		"/localhost:" + portS + "/acme/hello/1.0.0.json", // included host, another port
		"/example.com:" + portS + "/acme/hello/index.json",
		"/example.com:" + portS + "/acme/hello/terraform-provider-hello_1.0.0_linux_amd64.zip",
	}
	for _, p := range paths {
		code, _, body := s.get(t, p)
		if code != http.StatusNotFound || strings.Contains(string(body), "127.0.0.1") || strings.Contains(string(body), portS) ||
			strings.Contains(string(body), "refused") || !strings.Contains(string(body), "request id: ") {
			t.Errorf("GET %s: %d %q, want a 404 with a request id and nothing of the target", p, code, body)
		}
	}
	if n := target.n.Load(); n != 0 {
		t.Errorf("refused requests made %d connection(s) to the named port", n)
	}
	if noPort != nil && noPort.n.Load() != 0 {
		t.Errorf("refused requests made %d connection(s) to port 443", noPort.n.Load())
	}
	if noPort == nil {
		t.Log("port 443 on 127.0.0.1 is taken: the request without a port was checked for its answer only")
	}

	// The control: a server whose --include names the host and port connects there.
	s2 := startServe(t, nil, false, tmpl, "--include", "127.0.0.1:"+portS+"/acme/*", "--cache-dir", cache, "--stall-timeout", "3s")
	code, _, body := s2.get(t, paths[0])
	if target.n.Load() == 0 {
		t.Errorf("a request for an included host and port made no connection (%d %s): the listener cannot count", code, body)
	}
	if code != http.StatusBadGateway || strings.Contains(string(body), portS) || strings.Contains(string(body), "EOF") {
		t.Errorf("an unreachable registry: %d %q, want a 502 that does not echo what failed", code, body)
	}
	_ = port
}

// TestServeLimitFlags: --max-package-size refuses an archive over it, fetched or already cached
// (nothing is fetched for it), and --stall-timeout bounds a registry that stops sending.
func TestServeLimitFlags(t *testing.T) {
	reg, args := helloInRegistry(t)
	host := helloPlatforms[0]
	cache := args[len(args)-1]
	s := startServe(t, nil, false, append(args, "--max-package-size", "1MB")...)
	for _, p := range []string{helloArchive("1.0.0", host), helloPath + "1.0.0.json"} {
		code, _, body := s.get(t, p)
		lines := s.logLines(p)
		if code != http.StatusBadGateway || len(lines) != 1 || !strings.Contains(lines[0], `"refused":"too_large"`) {
			t.Errorf("GET %s with --max-package-size 1MB: %d %s\n%v", p, code, body, lines)
		}
	}
	if blobs, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*")); len(blobs) != 0 {
		for _, b := range blobs {
			if st, _ := os.Stat(b); st != nil && st.Size() > 1e6 {
				t.Errorf("a zip over the limit was fetched into the cache: %s", b)
			}
		}
	}
	// Cached by a server without the limit, then refused by one with it.
	s2 := startServe(t, nil, false, args...)
	if code, _, _ := s2.get(t, helloArchive("1.0.0", host)); code != 200 {
		t.Fatalf("without the limit: %d", code)
	}
	s3 := startServe(t, nil, false, append(args, "--max-package-size", "1MB")...)
	if code, _, _ := s3.get(t, helloArchive("1.0.0", host)); code != http.StatusBadGateway {
		t.Errorf("a cached zip over --max-package-size: %d, want 502", code)
	}

	// A registry that stops sending, through a proxy: the request ends near --stall-timeout.
	proxy := throttle.Start(t, reg.Host, 0)
	pargs := serveFromRegistry(t, proxy.Addr, reg.CAFile)
	s4 := startServe(t, nil, false, append(pargs, "--stall-timeout", "3s")...)
	proxy.SetRate(1000) // bytes per second, in 16 KiB bursts: a zip body then moves nothing for 16 s
	start := time.Now()
	code, _, body := s4.get(t, helloPath+"1.0.0.json")
	took := time.Since(start)
	proxy.SetRate(0) // let the proxy's connections drain at once when the test ends
	if code != http.StatusBadGateway || took > 20*time.Second || !strings.Contains(s4.logText(), "stopped answering") {
		t.Errorf("a stalled registry with --stall-timeout 3s: %d %q after %v\n%s", code, body, took.Round(time.Millisecond), grepLines(s4.logText(), helloPath, 5))
	}
	t.Logf("a stalled registry with --stall-timeout 3s: %d after %v", code, took.Round(time.Millisecond))
}

// TestServeLyingH1: a version whose index annotates a platform with another package's h1: gets
// that platform's VERSION.json refused (502), logged with both hashes; the honest version's hashes
// are listed, and only after they were checked against the zips (the zips are in the cache).
func TestServeLyingH1(t *testing.T) {
	reg, args := helloInRegistry(t)
	host := helloPlatforms[0]
	rewriteIndex(t, reg, "providers/acme/hello", "1.0.0", func(ix *ocispec.Index) {
		for i, d := range ix.Manifests {
			if d.Platform.OS+"_"+d.Platform.Architecture == host {
				ix.Manifests[i].Annotations[manifest.AnnotationH1] = helloHashes[helloPlatforms[1]].H1
			}
		}
	})
	s := startServe(t, nil, false, args...)
	code, _, body := s.get(t, helloPath+"1.0.0.json")
	if code != http.StatusBadGateway || strings.Contains(string(body), "h1:") {
		t.Errorf("VERSION.json of a lying index: %d %q, want a 502 without hashes", code, body)
	}
	log := s.logText()
	if !strings.Contains(log, "refused a lying h1: hash") || !strings.Contains(log, helloHashes[host].H1) || !strings.Contains(log, helloHashes[helloPlatforms[1]].H1) {
		t.Errorf("the log does not record the lie with both hashes:\n%s", grepLines(log, "h1", 5))
	}
}

// TestServeLocalCA: the local CA's name constraints show in `openssl x509 -text` (critical, the
// loopback addresses and localhost only); a certificate signed with the CA's own key for another
// name, and one for 127.0.0.1 from another CA, are both refused by Go's verifier; the server's
// certificate lives a week and a restart issues a new one.
func TestServeLocalCA(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		peers.Missing(t, "openssl")
	}
	_, args := helloInRegistry(t)
	state := t.TempDir()
	s := startServe(t, nil, false, append(args, "--state-dir", state)...)
	out, err := exec.Command(openssl, "x509", "-in", s.CAFile, "-noout", "-text").CombinedOutput()
	if err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"X509v3 Name Constraints: critical", "Permitted:", "IP:127.0.0.1/255.255.255.255", "DNS:localhost"} {
		if !strings.Contains(text, want) {
			t.Errorf("openssl x509 -text of the CA lacks %q:\n%s", want, text)
		}
	}
	dir := filepath.Dir(s.CAFile)
	ca := readPEMCert(t, s.CAFile)
	caKey := readPEMKey(t, filepath.Join(dir, "ca-key.pem"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	forged := issueCert(t, ca, caKey, "example.com", nil)
	if _, err := forged.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.com"}); err == nil || !strings.Contains(err.Error(), "constraint") {
		t.Errorf("a certificate for example.com signed with the CA's key: %v, want refused by the name constraints", err)
	}
	other := testca.NewCA(t, t.TempDir())
	certFile, _ := other.Issue(t, t.TempDir(), "127.0.0.1")
	if _, err := readPEMCert(t, certFile).Verify(x509.VerifyOptions{Roots: roots}); err == nil {
		t.Error("a certificate for 127.0.0.1 from another CA verifies against the local CA")
	}
	leaf := readPEMCert(t, filepath.Join(dir, "server.pem"))
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life > 8*24*time.Hour {
		t.Errorf("the server certificate lives %v", life)
	}
	s.stop(t, syscall.SIGTERM)
	startServe(t, nil, false, append(args, "--state-dir", state)...)
	if readPEMCert(t, filepath.Join(dir, "server.pem")).Equal(leaf) || !readPEMCert(t, s.CAFile).Equal(ca) {
		t.Error("a restart did not issue a new server certificate from the same CA")
	}
}

func readPEMCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(readPEMBlock(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readPEMKey(t *testing.T, path string) crypto.Signer {
	t.Helper()
	k, err := x509.ParsePKCS8PrivateKey(readPEMBlock(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return k.(crypto.Signer)
}

// readPEMBlock gives the bytes of the first PEM block of a file.
func readPEMBlock(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: not PEM", path)
	}
	return b.Bytes
}

// issueCert signs a server certificate for host with a CA's key.
func issueCert(t *testing.T, ca *x509.Certificate, key crypto.Signer, host string, _ []string) *x509.Certificate {
	t.Helper()
	lk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{host}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &lk.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
