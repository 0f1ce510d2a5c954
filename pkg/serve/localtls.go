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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oprov/oprov/internal/scratch"
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
	caLifetime = 365 * 24 * time.Hour
	caRenew    = 30 * 24 * time.Hour // a CA closer than this to expiry is replaced (clients trust the new one)
	// The server certificate is short-lived: a new one on every start, and a running server
	// issues itself another this long before the current one expires.
	leafLifetime = 7 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
)

// ensureLocalTLS loads, or makes, a CA in dir, and issues a fresh server certificate for hosts (IP
// addresses or DNS names) from it. The CA is name-constrained to exactly those hosts (critical
// constraints: a certificate it signs for any other name fails verification), so trusting it
// trusts nothing else. It is kept while it covers every host and is not near expiry, so clients
// keep trusting it; otherwise a new one is made (and clients must trust the new one). The
// server certificate lives leafLifetime, is issued on every start and again while the server
// runs, before it expires.
func ensureLocalTLS(dir string, hosts []string) (*LocalTLS, *tls.Config, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("TLS state directory: %w", err)
	}
	l := &LocalTLS{
		CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"),
	}
	caKeyFile := filepath.Join(dir, "ca-key.pem")
	ca, caKey, err := loadPair(l.CAFile, caKeyFile)
	if err != nil || !caFits(ca, hosts) {
		if ca, caKey, err = newCert(nil, nil, hosts, caLifetime); err != nil {
			return nil, nil, err
		}
		if err := writePair(caKeyFile, l.CAFile, ca, caKey); err != nil {
			return nil, nil, err
		}
	}
	is := &issuer{ca: ca, caKey: caKey, hosts: hosts, l: l}
	if err := is.issue(); err != nil {
		return nil, nil, err
	}
	return l, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: is.get}, nil
}

// issuer holds the current server certificate and issues the next one when it nears expiry.
type issuer struct {
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	hosts []string
	l     *LocalTLS

	mu   sync.Mutex
	leaf *x509.Certificate
	pair *tls.Certificate
}

// issue makes a new server certificate and writes it (for clients and tools that read it).
func (is *issuer) issue() error {
	leaf, key, err := newCert(is.ca, is.caKey, is.hosts, leafLifetime)
	if err != nil {
		return err
	}
	if err := writePair(is.l.KeyFile, is.l.CertFile, leaf, key); err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(pemBlock("CERTIFICATE", leaf.Raw), pemBlock("PRIVATE KEY", kder))
	if err != nil {
		return err
	}
	is.leaf, is.pair = leaf, &pair
	return nil
}

func (is *issuer) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if time.Until(is.leaf.NotAfter) < leafRenew {
		if err := is.issue(); err != nil && time.Until(is.leaf.NotAfter) <= 0 {
			return nil, err
		}
	}
	return is.pair, nil
}

// caFits reports whether a CA is constrained to names that cover every host and is not near
// expiry. An older CA without constraints never fits: it is replaced.
func caFits(ca *x509.Certificate, hosts []string) bool {
	if !ca.IsCA || !ca.PermittedDNSDomainsCritical || time.Until(ca.NotAfter) < caRenew+leafLifetime {
		return false
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(ca.PermittedIPRanges, func(n *net.IPNet) bool { return n.IP.Equal(ip) && isHostMask(n.Mask) }) {
				return false
			}
		} else if !slices.Contains(ca.PermittedDNSDomains, strings.ToLower(h)) {
			return false
		}
	}
	return true
}

func isHostMask(m net.IPMask) bool { ones, bits := m.Size(); return ones == bits && bits > 0 }

// constraints gives the permitted names for hosts: each IP address alone, each DNS name (and,
// as name constraints go, its subdomains).
func constraints(hosts []string) (dns []string, ips []*net.IPNet) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if v4 := ip.To4(); v4 != nil {
				ips = append(ips, &net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)})
			} else {
				ips = append(ips, &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)})
			}
		} else {
			dns = append(dns, strings.ToLower(h))
		}
	}
	return dns, ips
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
		tmpl.PermittedDNSDomainsCritical = true
		tmpl.PermittedDNSDomains, tmpl.PermittedIPRanges = constraints(hosts)
		if len(tmpl.PermittedDNSDomains) == 0 {
			// No DNS name at all: constrain DNS to a name that cannot be resolved.
			tmpl.PermittedDNSDomains = []string{"invalid"}
		}
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
