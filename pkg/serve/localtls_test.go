package serve

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLocalTLS: the first start makes a CA constrained to the hosts and a short-lived certificate
// for them; a later start keeps the CA and issues a new certificate; a host outside the CA's
// constraints gets a new CA; a damaged certificate is replaced.
func TestLocalTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	l, cfg, err := ensureLocalTLS(dir, hosts)
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
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life > 8*24*time.Hour {
		t.Errorf("the server certificate lives %v, want about a week", life)
	}
	if !ca.PermittedDNSDomainsCritical || len(ca.PermittedDNSDomains) != 1 || len(ca.PermittedIPRanges) != 2 {
		t.Errorf("the CA's name constraints: critical %v, DNS %v, IP %v", ca.PermittedDNSDomainsCritical, ca.PermittedDNSDomains, ca.PermittedIPRanges)
	}
	if c, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); err != nil || c == nil {
		t.Fatalf("the TLS config gives no certificate: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "ca-key.pem")); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the CA key is not mode 0600: %v", st)
	}

	l2, _, err := ensureLocalTLS(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if !readCert(t, l2.CAFile).Equal(ca) || readCert(t, l2.CertFile).Equal(leaf) {
		t.Error("a second start replaced the CA, or kept the server certificate")
	}

	l3, _, err := ensureLocalTLS(dir, append(hosts, "mirror.internal"))
	if err != nil {
		t.Fatal(err)
	}
	ca3, leaf3 := readCert(t, l3.CAFile), readCert(t, l3.CertFile)
	pool3 := x509.NewCertPool()
	pool3.AddCert(ca3)
	if ca3.Equal(ca) {
		t.Error("a host outside the CA's constraints did not get a new CA")
	}
	if _, err := leaf3.Verify(x509.VerifyOptions{Roots: pool3, DNSName: "mirror.internal"}); err != nil {
		t.Errorf("the new certificate does not verify for mirror.internal: %v", err)
	}

	os.WriteFile(l.CertFile, []byte("damaged"), 0o644)
	if _, _, err := ensureLocalTLS(dir, hosts); err != nil {
		t.Fatalf("a damaged certificate was not replaced: %v", err)
	}
}

// TestLocalCANameConstraints: a certificate the CA signs for a name it was not made for (its own
// key, so the signature is good) is refused by Go's verifier.
func TestLocalCANameConstraints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, _, err := ensureLocalTLS(dir, []string{"127.0.0.1", "::1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	ca, caKey, err := loadPair(l.CAFile, filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, host := range []string{"example.com", "10.0.0.1", "localhost.example.com"} {
		leaf, _, err := newCert(ca, caKey, []string{host}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err == nil {
			t.Errorf("a certificate for %s issued by the constrained CA verifies", host)
		} else if !strings.Contains(err.Error(), "constraint") {
			t.Errorf("%s: refused for another reason than the constraints: %v", host, err)
		}
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
