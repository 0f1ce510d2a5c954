package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestServeUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"serve"},
		{"serve", "oci-layout:x"},
		{"serve", "reg.io/${owner}/${type}"},
		{"serve", "reg.io/${namespace}/${type}", "--tls-cert", "c.pem"},
		{"serve", "reg.io/${namespace}/${type}", "-o", "yaml"},
		{"serve", "reg.io/${namespace}/${type}", "--include", "example.com/a*/b"},
		{"serve", "reg.io/${namespace}/${type}", "--key", "a.pub", "--policy", "p.hcl"},
		{"serve", "reg.io/${namespace}/${type}", "--registry-concurrency", "0"},
		// The registry signs only what a policy checked, and only providers.
		{"serve", "reg.io/${namespace}/${type}", "--signing-key", "k.asc"},
		{"serve", "--modules", "reg.io/${namespace}/${name}/${system}", "--signing-key", "k.asc"},
	} {
		_, stderr, code := runCLI(t, args...)
		if code != exitUsage || !strings.HasPrefix(stderr, "oprov: ") {
			t.Errorf("oprov %s: exit %d, stderr %q; want a usage error", strings.Join(args, " "), code, stderr)
		}
	}
}

// lockedBuffer is written by the command while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// TestServeLayout runs the command in-process on a layout: it makes the local CA on first start,
// prints where it listens, the CA and the CLI configuration, serves index.json over TLS that
// the CA verifies, and returns when its context ends.
func TestServeLayout(t *testing.T) {
	repo, _ := pushedLayout(t)
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	o := &serveOptions{
		io: &IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errb}, Source: repo, Address: "example.com/acme/hello",
		Listen: "127.0.0.1:0", StateDir: filepath.Join(t.TempDir(), "state"), CacheDir: filepath.Join(t.TempDir(), "cache"),
		Concurrency: 2, Refresh: time.Minute, Drain: time.Minute, output: jsonOut,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	var info serveInfo
	for deadline := time.Now().Add(10 * time.Second); json.Unmarshal(out.Bytes(), &info) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no JSON: %q %q", out.Bytes(), errb.Bytes())
		}
	}
	if info.CAFile != filepath.Join(o.StateDir, "ca.pem") || !strings.Contains(info.CLIConfig, `url     = "`+info.URL+`"`) ||
		!strings.Contains(info.CLIConfig, `include = ["example.com/acme/hello"]`) {
		t.Errorf("serve printed %+v", info)
	}
	pem, err := os.ReadFile(info.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(info.URL + "example.com/acme/hello/index.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"versions":{"1.0.0":{}}}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("index.json: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve returned %v after its context ended", err)
	}
	if !bytes.Contains(errb.Bytes(), []byte(`"path":"/example.com/acme/hello/index.json","status":200`)) {
		t.Errorf("no access log line for the request:\n%s", errb.Bytes())
	}
}

// TestServeMissingLayout: a layout that is not there fails at start (exit 1), naming it.
func TestServeMissingLayout(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "serve", "oci-layout:"+dir+"/missing", "--address", "example.com/acme/hello",
		"--listen", "127.0.0.1:0", "--state-dir", dir+"/state", "--cache-dir", dir+"/cache")
	if code != exitError || !strings.Contains(stderr, dir+"/missing is not an OCI image layout") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
