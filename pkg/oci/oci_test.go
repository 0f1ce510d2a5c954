package oci

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"oras.land/oras-go/v2/registry"
)

func TestParseRef(t *testing.T) {
	cases := map[string]Ref{
		"ghcr.io/acme/hello":                                  {Registry: "ghcr.io", Repository: "acme/hello"},
		"127.0.0.1:5000/p/acme/hello:1.0.0":                   {Registry: "127.0.0.1:5000", Repository: "p/acme/hello", Reference: "1.0.0"},
		"oci-layout:./dir":                                    {Layout: "./dir"},
		"oci-layout:/tmp/l:1.2.0_abc":                         {Layout: "/tmp/l", Reference: "1.2.0_abc"},
		"oci-layout:/tmp/l@sha256:" + strings.Repeat("a", 64): {Layout: "/tmp/l", Reference: "sha256:" + strings.Repeat("a", 64)},
	}
	for in, want := range cases {
		got, err := ParseRef(in)
		if err != nil || got != want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if err == nil && got.String() != in {
			t.Errorf("ParseRef(%q).String() = %q", in, got.String())
		}
	}
	for _, bad := range []string{"hello", "oci-layout:", "Host/UPPER", "ghcr.io/acme/hello:bad tag"} {
		if _, err := ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) accepted it", bad)
		}
	}
	if !(Ref{Registry: "localhost:5000"}).IsLoopback() || !(Ref{Registry: "127.0.0.1"}).IsLoopback() || (Ref{Registry: "ghcr.io"}).IsLoopback() {
		t.Error("IsLoopback")
	}
}

func TestRetriesOn503(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/acme/hello/tags/list" && calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"name":"acme/hello","tags":["1.0.0","latest","0.9.0"]}`))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	ref, _ := ParseRef(strings.TrimPrefix(srv.URL, "https://") + "/acme/hello")
	target, err := NewClient(Options{CAFile: ca, RegistryConfig: filepath.Join(t.TempDir(), "c.json")}).Open(context.Background(), ref, false)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := registry.Tags(context.Background(), target)
	if err != nil {
		t.Fatalf("after two 503s: %v", err)
	}
	if len(vs) != 3 || vs[0] != "1.0.0" || calls.Load() != 3 {
		t.Errorf("versions %v after %d calls", vs, calls.Load())
	}
}

func TestExplain(t *testing.T) {
	ref := Ref{Registry: "127.0.0.1:1", Repository: "a/b", Reference: "1.0.0"}
	err := Explain("push", ref, &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED})
	if !strings.Contains(err.Error(), "connection refused (is the registry running") {
		t.Errorf("connection refused: %v", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Error("Explain lost the cause")
	}
	plain := Explain("push", ref, errors.New("odd"))
	if plain.Error() != "push 127.0.0.1:1/a/b:1.0.0: odd" {
		t.Errorf("unknown error: %v", plain)
	}
}

// TestExplainPlainHTTPToTLS: --plain-http against a registry that speaks TLS gets the answer
// "it speaks HTTPS", not a raw "response status code 400".
func TestExplainPlainHTTPToTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ref, _ := ParseRef(strings.TrimPrefix(srv.URL, "https://") + "/acme/hello")
	target, err := NewClient(Options{PlainHTTP: true, RegistryConfig: filepath.Join(t.TempDir(), "c.json")}).Open(context.Background(), ref, false)
	if err == nil {
		_, err = registry.Tags(context.Background(), target)
	}
	err = Explain("list", ref, err)
	if remedy, _, _ := RemedyOf(err); remedy != RemedyHTTPS || !strings.Contains(err.Error(), "speaks HTTPS") {
		t.Errorf("plain HTTP to a TLS registry: %v (remedy %q)", err, remedy)
	}
}
