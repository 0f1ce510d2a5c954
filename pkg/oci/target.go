package oci

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Target is what every place oprov reads or writes provides: oras-go's graph target (so oras.Copy
// works between any two) plus tag listing.
type Target interface {
	oras.GraphTarget
	registry.TagLister
}

// ReadOnly is what reading and verifying a provider needs: any Target, or a read-only store such
// as an OCI-layout tarball.
type ReadOnly interface {
	oras.ReadOnlyGraphTarget
	registry.TagLister
}

// Options is the network and credential policy for opening registry targets.
type Options struct {
	// PlainHTTP talks HTTP instead of HTTPS. Without it, a loopback registry that answers HTTPS with
	// plain HTTP is used over HTTP anyway, as other OCI tools do; any other registry must speak TLS.
	PlainHTTP bool
	// CAFile adds a PEM bundle of CAs to the system roots (SSL_CERT_FILE is honoured as well).
	CAFile string
	// RegistryConfig is a docker-style config file to read credentials from instead of the default
	// ($DOCKER_CONFIG/config.json or ~/.docker/config.json, then containers' auth.json).
	RegistryConfig string
	// Credential, when set, is used instead of any stored credentials.
	Credential *auth.Credential
}

func openLayout(ctx context.Context, dir string, create bool) (Target, error) {
	if !create {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return nil, fmt.Errorf("%s is not an OCI image layout (no oci-layout file): %w", dir, errors.Unwrap(err))
		}
	}
	s, err := oci.NewWithContext(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("opening OCI layout %s: %w", dir, err)
	}
	return s, nil
}

// repository opens a remote repository with the client's network and credential policy.
func (c *Client) repository(ctx context.Context, ref Ref) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return nil, fmt.Errorf("reference %s: %w", ref, err)
	}
	client, err := c.authClient()
	if err != nil {
		return nil, err
	}
	repo.Client = client
	repo.PlainHTTP = c.PlainHTTP
	if !c.PlainHTTP && ref.IsLoopback() {
		if repo.PlainHTTP, err = speaksPlainHTTP(ctx, client, ref.Registry); err != nil {
			return nil, err
		}
	}
	return repo, nil
}

// registry opens a registry (for login) with the same policy as repository.
func (c *Client) registry(ctx context.Context, host string) (*remote.Registry, error) {
	reg, err := remote.NewRegistry(host)
	if err != nil {
		return nil, fmt.Errorf("registry %q: %w", host, err)
	}
	client, err := c.authClient()
	if err != nil {
		return nil, err
	}
	reg.Client = client
	reg.PlainHTTP = c.PlainHTTP
	if !c.PlainHTTP && (Ref{Registry: host}).IsLoopback() {
		if reg.PlainHTTP, err = speaksPlainHTTP(ctx, client, host); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// speaksPlainHTTP probes a loopback registry over HTTPS and reports whether it answered with plain
// HTTP instead. Any other outcome (including TLS errors) keeps HTTPS, so a TLS registry on
// 127.0.0.1 is used over TLS and its certificate is still checked; but a registry that stopped
// answering the probe is an error at once, rather than a second wait.
func speaksPlainHTTP(ctx context.Context, client *auth.Client, host string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/v2/", nil)
	if err != nil {
		return false, nil
	}
	resp, err := client.Client.Do(req)
	if err == nil {
		resp.Body.Close()
		return false, nil
	}
	var stall *StallError
	if errors.As(err, &stall) {
		return false, stall
	}
	return errors.Is(err, http.ErrSchemeMismatch), nil
}

// authClient builds the HTTP client for a registry: the client's transport (TLS, bounded waits,
// bodies watched for progress), retries, its user agent and credentials.
func (cl *Client) authClient() (*auth.Client, error) {
	rt, err := cl.Transport()
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	header.Set("User-Agent", cl.userAgent())
	opts := cl.Options
	c := &auth.Client{
		Client: &http.Client{Transport: retry.NewTransport(rt)},
		Header: header,
		Cache:  auth.NewCache(),
	}
	if opts.Credential != nil {
		cred := *opts.Credential
		c.Credential = func(context.Context, string) (auth.Credential, error) { return cred, nil }
		return c, nil
	}
	store, err := CredentialStore(opts.RegistryConfig)
	if err != nil {
		return nil, err
	}
	c.Credential = credentials.Credential(store)
	return c, nil
}

// TLSConfig gives the TLS policy: the system roots (which honour SSL_CERT_FILE) plus caFile.
func TLSConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		// nil RootCAs: Go loads the system roots only if a TLS handshake happens.
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificates", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// CredentialStore opens the docker-style credential store: configPath when given, otherwise
// docker's config (with its credential helpers), falling back to containers' auth.json.
func CredentialStore(configPath string) (credentials.Store, error) {
	opts := credentials.StoreOptions{AllowPlaintextPut: true, DetectDefaultNativeStore: true}
	if configPath != "" {
		s, err := credentials.NewStore(configPath, opts)
		if err != nil {
			return nil, fmt.Errorf("credentials file %s: %w", configPath, err)
		}
		return s, nil
	}
	primary, err := credentials.NewStoreFromDocker(opts)
	if err != nil {
		return nil, fmt.Errorf("docker credentials config: %w", err)
	}
	var fallbacks []credentials.Store
	for _, p := range containersAuthFiles() {
		if _, err := os.Stat(p); err == nil {
			if s, err := credentials.NewStore(p, credentials.StoreOptions{}); err == nil {
				fallbacks = append(fallbacks, s)
			}
		}
	}
	return credentials.NewStoreWithFallbacks(primary, fallbacks...), nil
}

// containersAuthFiles lists where podman, buildah and skopeo keep credentials.
func containersAuthFiles() []string {
	var out []string
	if p := os.Getenv("REGISTRY_AUTH_FILE"); p != "" {
		out = append(out, p)
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		out = append(out, filepath.Join(d, "containers", "auth.json"))
	}
	if d, err := os.UserConfigDir(); err == nil {
		out = append(out, filepath.Join(d, "containers", "auth.json"))
	}
	return out
}

// traceTransport logs every request with its status and timing (Client.Trace),
// and, once a response body is closed, how many bytes of it were read ("http-body:" lines).
// Headers, and so credentials, are never printed.
type traceTransport struct {
	next  http.RoundTripper
	start time.Time
	w     io.Writer
}

func (t *traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	began := time.Now()
	resp, err := t.next.RoundTrip(req)
	status := "error: "
	if err != nil {
		status += err.Error()
	} else {
		status = resp.Status
		resp.Body = &countedBody{ReadCloser: resp.Body, label: req.Method + " " + req.URL.Redacted(), w: t.w}
	}
	fmt.Fprintf(t.w, "http: +%6.1fms %4.1fms %s %s %s\n", float64(began.Sub(t.start).Microseconds())/1000,
		float64(time.Since(began).Microseconds())/1000, req.Method, req.URL.Redacted(), status)
	return resp, err
}

type countedBody struct {
	io.ReadCloser
	label string
	w     io.Writer
	n     int64
	once  sync.Once
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

func (b *countedBody) Close() error {
	b.once.Do(func() { fmt.Fprintf(b.w, "http-body: %d bytes %s\n", b.n, b.label) })
	return b.ReadCloser.Close()
}
