package serve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/oprov/oprov/pkg/scratch"
)

// LocalTLS is a certificate authority of this machine's own and a server certificate it issued,
// kept in a state directory, for a server used locally: clients trust the CA once
// (SSL_CERT_FILE), and later starts reuse both.
type LocalTLS struct {
	CAFile   string // the CA's certificate (PEM): what clients trust
	CertFile string
	KeyFile  string
}

const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 365 * 24 * time.Hour
	leafRenew    = 30 * 24 * time.Hour // a certificate closer than this to expiry is replaced
)

// EnsureLocalTLS loads, or makes on first use, a CA in dir and a server certificate for hosts (IP
// addresses or DNS names) signed by it. A certificate that does not cover every host, is not the
// CA's, or is near expiry is replaced; the CA is kept, so clients keep trusting it.
func EnsureLocalTLS(dir string, hosts []string) (*LocalTLS, *tls.Config, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("TLS state directory: %w", err)
	}
	l := &LocalTLS{
		CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"),
	}
	caKeyFile := filepath.Join(dir, "ca-key.pem")
	ca, caKey, err := loadPair(l.CAFile, caKeyFile)
	if err != nil {
		if ca, caKey, err = newCert(nil, nil, nil, caLifetime); err != nil {
			return nil, nil, err
		}
		if err := writePair(caKeyFile, l.CAFile, ca, caKey); err != nil {
			return nil, nil, err
		}
	}
	leaf, leafKey, err := loadPair(l.CertFile, l.KeyFile)
	if err != nil || !leafFits(leaf, ca, hosts) {
		if leaf, leafKey, err = newCert(ca, caKey, hosts, leafLifetime); err != nil {
			return nil, nil, err
		}
		if err := writePair(l.KeyFile, l.CertFile, leaf, leafKey); err != nil {
			return nil, nil, err
		}
	}
	kder, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(pemBlock("CERTIFICATE", leaf.Raw), pemBlock("PRIVATE KEY", kder))
	if err != nil {
		return nil, nil, err
	}
	return l, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}, nil
}

// leafFits reports whether a server certificate is the CA's, covers every host, and is not near
// expiry.
func leafFits(leaf, ca *x509.Certificate, hosts []string) bool {
	if leaf.CheckSignatureFrom(ca) != nil || time.Until(leaf.NotAfter) < leafRenew {
		return false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// newCert makes a key and a certificate: a CA when parent is nil, else a server certificate for
// hosts signed by parent.
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, hosts []string, lifetime time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "oprov serve local CA (" + host + ")"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(lifetime),
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
		tmpl.MaxPathLenZero = true
		parent, parentKey = tmpl, key
	} else {
		tmpl.Subject = pkix.Name{CommonName: "oprov serve"}
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func loadPair(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cpem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	kpem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(cpem)
	kb, _ := pem.Decode(kpem)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, errors.New("the key does not belong to the certificate")
	}
	return cert, key, nil
}

// writePair writes a key (mode 0600 from the start) and then its certificate, each under a
// temporary name first: a start killed half-way leaves a pair that does not load, which the next
// start replaces.
func writePair(keyFile, certFile string, cert *x509.Certificate, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(keyFile), ".key-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	_, err = tmp.Write(pemBlock("PRIVATE KEY", kder))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), keyFile)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", keyFile, err)
	}
	return scratch.WriteFileAtomic(certFile, func(w io.Writer) error { _, err := w.Write(pemBlock("CERTIFICATE", cert.Raw)); return err })
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
