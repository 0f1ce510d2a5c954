package serve

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// TestLocalTLS: the first start makes a CA and a certificate for the hosts; a later start reuses
// both; a new host gets a new certificate from the same CA; a damaged certificate is replaced.
func TestLocalTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	l, cfg, err := EnsureLocalTLS(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	ca, leaf := readCert(t, l.CAFile), readCert(t, l.CertFile)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h}); err != nil {
			t.Errorf("the certificate does not verify for %s: %v", h, err)
		}
	}
	if len(cfg.Certificates) != 1 {
		t.Fatalf("TLS config holds %d certificates", len(cfg.Certificates))
	}
	if st, _ := os.Stat(filepath.Join(dir, "ca-key.pem")); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the CA key is not mode 0600: %v", st)
	}

	l2, _, err := EnsureLocalTLS(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if !readCert(t, l2.CAFile).Equal(ca) || !readCert(t, l2.CertFile).Equal(leaf) {
		t.Error("a second start replaced the CA or the certificate")
	}

	l3, _, err := EnsureLocalTLS(dir, append(hosts, "mirror.internal"))
	if err != nil {
		t.Fatal(err)
	}
	leaf3 := readCert(t, l3.CertFile)
	if !readCert(t, l3.CAFile).Equal(ca) || leaf3.Equal(leaf) || leaf3.VerifyHostname("mirror.internal") != nil {
		t.Error("a new host did not get a new certificate from the same CA")
	}

	os.WriteFile(l.CertFile, []byte("damaged"), 0o644)
	if _, _, err := EnsureLocalTLS(dir, hosts); err != nil {
		t.Fatalf("a damaged certificate was not replaced: %v", err)
	}
	if readCert(t, l.CertFile).CheckSignatureFrom(ca) != nil {
		t.Error("the replacement is not the CA's")
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s is not PEM", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
