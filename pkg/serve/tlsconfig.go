package serve

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
)

// TLSOptions say where the server's certificate comes from: a certificate and key the operator
// gives, or else a local CA made on first start in StateDir (default defaultStateDir) that signs
// a certificate for loopback and URL's host.
type TLSOptions struct {
	CertFile, KeyFile string
	StateDir          string
	URL               string // the base URL clients use
}

// TLSConfig gives the server's TLS configuration, and the CA file clients must trust when the
// certificate is the local CA's ("" for the operator's own).
func TLSConfig(o TLSOptions) (*tls.Config, string, error) {
	if o.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, "", &KeyPairError{err}
		}
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}, "", nil
	}
	dir := o.StateDir
	if dir == "" {
		var err error
		if dir, err = defaultStateDir(); err != nil {
			return nil, "", err
		}
	}
	dir, err := filepath.Abs(dir) // clients get the CA's path from any directory
	if err != nil {
		return nil, "", err
	}
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if h := urlHost(o.URL); h != "" && !slices.Contains(hosts, h) {
		hosts = append(hosts, h)
	}
	l, cfg, err := ensureLocalTLS(dir, hosts)
	if err != nil {
		return nil, "", fmt.Errorf("local certificate in %s: %w", dir, err)
	}
	return cfg, l.CAFile, nil
}

// KeyPairError is TLSConfig's error when the operator's certificate and key cannot be loaded.
type KeyPairError struct{ Err error }

func (e *KeyPairError) Error() string { return e.Err.Error() }
func (e *KeyPairError) Unwrap() error { return e.Err }

// DefaultURL is the base URL for a listening address: a wildcard address is reached on loopback.
func DefaultURL(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "https://" + net.JoinHostPort(host, fmt.Sprint(a.Port)) + "/"
}

// defaultStateDir is where the local CA is kept: $XDG_STATE_HOME/oprov/serve, else
// ~/.local/state/oprov/serve.
func defaultStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "oprov", "serve"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory for the local CA: pass --state-dir (%w)", err)
	}
	return filepath.Join(home, ".local", "state", "oprov", "serve"), nil
}

// urlHost is the host name or IP address of a URL, or "".
func urlHost(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
