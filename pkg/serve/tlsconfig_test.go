package serve

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTLSConfig: without a certificate, the local CA is made in the state directory (default
// $XDG_STATE_HOME/oprov/serve) for loopback and the URL's host; the operator's own pair is loaded
// as given, and one that cannot be loaded is a KeyPairError.
func TestTLSConfig(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	cfg, caFile, err := TLSConfig(TLSOptions{URL: "https://mirror.internal:8443/"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(state, "oprov", "serve"); filepath.Dir(caFile) != want {
		t.Errorf("CA file %s, want it in %s", caFile, want)
	}
	leaf := readCert(t, filepath.Join(filepath.Dir(caFile), "server.pem"))
	for _, h := range []string{"mirror.internal", "127.0.0.1", "localhost"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("the local certificate does not cover %s: %v", h, err)
		}
	}
	if c, err := cfg.GetCertificate(nil); err != nil || c == nil {
		t.Errorf("TLS config gives no certificate: %v", err)
	}

	// The operator's pair: the local one will do as one.
	own, _, err := TLSConfig(TLSOptions{CertFile: filepath.Join(filepath.Dir(caFile), "server.pem"), KeyFile: filepath.Join(filepath.Dir(caFile), "server-key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	if len(own.Certificates) != 1 {
		t.Errorf("the operator's pair was not loaded")
	}
	_, _, err = TLSConfig(TLSOptions{CertFile: filepath.Join(t.TempDir(), "none.pem"), KeyFile: "none.key"})
	var kp *KeyPairError
	if !errors.As(err, &kp) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing pair: %v, want a KeyPairError", err)
	}
}

func TestDefaultURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8443":   "https://127.0.0.1:8443/",
		"[::]:8443":      "https://127.0.0.1:8443/",
		"10.0.0.5:443":   "https://10.0.0.5:443/",
		"[::1]:9000":     "https://[::1]:9000/",
		"127.0.0.1:8443": "https://127.0.0.1:8443/",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := DefaultURL(a); got != want {
			t.Errorf("DefaultURL(%s) = %s, want %s", addr, got, want)
		}
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/someone")
	if d, err := defaultStateDir(); err != nil || !strings.HasSuffix(d, filepath.Join(".local", "state", "oprov", "serve")) {
		t.Errorf("defaultStateDir = %s, %v", d, err)
	}
}
