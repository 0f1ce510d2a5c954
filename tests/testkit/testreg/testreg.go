// Package testreg runs a real distribution registry on 127.0.0.1 for tests, over TLS with a CA
// made for the test (or over plain HTTP when asked), optionally behind htpasswd auth.
package testreg

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testca"
)

// Registry is a running registry.
type Registry struct {
	Host    string // 127.0.0.1:PORT
	CAFile  string // PEM of the CA that signed its certificate ("" for plain HTTP)
	Storage string // the registry's storage root directory
	TLS     bool
	cmd     *exec.Cmd
	logFile string
}

// Options configure a registry.
type Options struct {
	PlainHTTP bool
	// Users maps user names to passwords; when set, the registry wants htpasswd basic auth.
	Users map[string]string
	// CA reuses a CA (from another registry) instead of making a new one.
	CA *CA
}

// Start starts a registry and stops it when the test ends.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	bin := peers.Require(t, "registry")
	dir := t.TempDir()
	r := &Registry{Storage: filepath.Join(dir, "storage"), TLS: !opts.PlainHTTP, logFile: filepath.Join(dir, "registry.log")}
	port := freePort(t)
	r.Host = fmt.Sprintf("127.0.0.1:%d", port)

	var cfg strings.Builder
	fmt.Fprintf(&cfg, "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n", r.Storage)
	fmt.Fprintf(&cfg, "http:\n  addr: %s\n  secret: oprov-test-secret\n", r.Host)
	if r.TLS {
		ca := opts.CA
		if ca == nil {
			ca = NewCA(t, dir)
		}
		r.CAFile = ca.File
		cert, key := ca.Issue(t, dir, "127.0.0.1")
		fmt.Fprintf(&cfg, "  tls:\n    certificate: %s\n    key: %s\n", cert, key)
	}
	if len(opts.Users) > 0 {
		var ht strings.Builder
		for u, p := range opts.Users {
			h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&ht, "%s:%s\n", u, h)
		}
		hp := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(hp, []byte(ht.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "auth:\n  htpasswd:\n    realm: oprov-test\n    path: %s\n", hp)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(r.logFile)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "serve", cfgPath)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	r.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(); log.Close() })
	r.waitReady(t)
	return r
}

// URL gives the registry's base URL.
func (r *Registry) URL() string {
	if r.TLS {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// Client is an HTTP client that trusts the registry's CA.
func (r *Registry) Client(t testing.TB) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func (r *Registry) waitReady(t testing.TB) {
	t.Helper()
	c := r.Client(t)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := c.Get(r.URL() + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 || resp.StatusCode == 401 {
				return
			}
		}
		if r.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := os.ReadFile(r.logFile)
	t.Fatalf("registry on %s did not come up:\n%s", r.Host, out)
}

// Stop stops the registry; its storage stays until the test ends.
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil && r.cmd.ProcessState == nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// RepoExists reports whether the registry's storage has anything for a repository.
func (r *Registry) RepoExists(repo string) bool {
	_, err := os.Stat(filepath.Join(r.Storage, "docker", "registry", "v2", "repositories", repo))
	return err == nil
}

// BlobPath gives the storage path of a blob's data, by its hex sha256.
func (r *Registry) BlobPath(hex string) string {
	return filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// CA is a certificate authority made for one test (see tests/testkit/testca).
type CA = testca.CA

// NewCA makes a CA and writes its certificate to dir/ca.pem.
func NewCA(t testing.TB, dir string) *CA { return testca.NewCA(t, dir) }
