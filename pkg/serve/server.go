// Package serve is a Provider Network Mirror Protocol server (what OpenTofu's and Terraform's
// network_mirror installation method reads) in front of OCI repositories: a registry through a
// repository template, or an OCI layout. Versions are read through pkg/source's OCI source, so a
// trust policy applies as it does for the loader (each tag resolved once, verified by digest);
// archives are fetched by digest, checked, and kept in pkg/cache before any byte is sent.
//
// The server keeps no state beyond that cache: several replicas can serve one registry.
package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
)

// Config is what a server serves and how.
type Config struct {
	Template *Template
	// Include, when set, limits the providers served (the template's others get 404).
	Include func(manifest.ProviderAddress) bool
	// Policy, when set, is the trust policy: only versions that pass it are listed and served.
	Policy *sign.Policy
	Cache  *cache.Cache
	// Registry is the one registry client: its policy and the limits on what the registry can
	// make every request do.
	Registry *oci.Client
	// Refresh is how long a tag resolved to an index stands before it is resolved again (0: every
	// request resolves afresh).
	Refresh time.Duration
	// RegistryConcurrency bounds the calls to the registry (or layout) under way at once.
	RegistryConcurrency int
	// Log receives the access log and events; nil discards them.
	Log *slog.Logger
	// Clients bounds what clients can make the server hold (zero fields: the defaults).
	Clients ClientLimits
	// CatalogRefresh is how often Run reads the catalog (GET /) again; 0 turns the catalog off.
	CatalogRefresh time.Duration
	// Providers are listed in the catalog from the start (others once a client asks for them).
	Providers []manifest.ProviderAddress
	// Modules, when set, also serves the Module Registry Protocol (modules.go); Template may
	// then be nil (no providers).
	Modules *ModuleConfig
	// Signer, when set, also serves the Provider Registry Protocol (registry.go): SHA256SUMS of
	// the versions whose signatures passed Policy, signed with this OpenPGP key.
	Signer *Signer
	// MaxRegistryVersions bounds the versions of one provider the registry checks and lists, the
	// newest first (0: 1000).
	MaxRegistryVersions int
}

// Server answers the protocol, the catalog, /healthz and /metrics.
type Server struct {
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	sem      chan struct{}
	verified *source.Verified
	cat      *catalogState
	mods     *moduleState
	// registryHost is the hostname service discovery answers providers.v1 for.
	registryHost string

	limits   ClientLimits
	archives chan struct{} // one per archive response under way

	active atomic.Int64 // requests under way
	idPre  string       // request ids: this prefix and a counter
	idSeq  atomic.Uint64

	genMu sync.Mutex
	gen   *generation

	flight singleflight.Group
	h1s    sync.Map // zip digest -> h1: hash, computed once
}

// New makes a server.
func New(cfg Config) (*Server, error) {
	if (cfg.Template == nil && cfg.Modules == nil) || cfg.Cache == nil {
		return nil, fmt.Errorf("serve: a template (or a module template) and a cache are needed")
	}
	if cfg.Template.HostFromRequest() && cfg.Include == nil {
		return nil, fmt.Errorf("serve: template takes the registry host from the request: an include list is needed")
	}
	cfg.Cache.Repair = true // a long-running server fetches a damaged zip again, and logs it
	if cfg.RegistryConcurrency < 1 {
		cfg.RegistryConcurrency = 1
	}
	if cfg.Registry == nil {
		cfg.Registry = oci.NewClient(oci.Options{})
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limits := cfg.Clients.withDefaults()
	var pre [4]byte
	rand.Read(pre[:])
	return &Server{
		cfg: cfg, log: log, metrics: newMetrics(),
		sem:      make(chan struct{}, cfg.RegistryConcurrency),
		verified: source.NewVerified(4096),
		cat:      newCatalogState(cfg),
		mods:     newModuleState(),
		limits:   limits,
		archives: make(chan struct{}, limits.MaxArchives),
		idPre:    hex.EncodeToString(pre[:]),
	}, nil
}

// Handler gives the HTTP handler: the catalog at / and /providers/HOST/NAMESPACE/TYPE, the
// protocol below /, the module registry below modulesPath (with service discovery), /healthz and
// /metrics, with the access log.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("GET /{$}", s.serveCatalog)
	mux.HandleFunc("GET /providers/{host}/{ns}/{type}", s.serveProviderPage)
	mux.HandleFunc("GET /", s.serveProtocol)
	s.routeModules(mux)
	s.routeRegistry(mux)
	return s.accessLog(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.admit(w, r) {
			mux.ServeHTTP(w, r)
		}
	}))
}

// route names a path for metrics, without unbounded labels.
func route(path string) string {
	if len(path) > 4096 {
		return "other"
	}
	switch path {
	case "/healthz", "/metrics":
		return path[1:]
	case "/":
		return "catalog"
	case "/.well-known/terraform.json":
		return "discovery"
	}
	if strings.HasPrefix(path, registryPath) && strings.Count(path, "/") >= 6 {
		switch {
		case strings.HasSuffix(path, "/versions"):
			return "registry_versions"
		case strings.HasSuffix(path, "/SHA256SUMS"), strings.HasSuffix(path, "/SHA256SUMS.sig"):
			return "registry_sums"
		case strings.Contains(path, "/download/"):
			return "registry_download"
		}
	}
	if strings.HasPrefix(path, "/modules/") && !strings.HasPrefix(path, modulesPath) && strings.Count(path, "/") == 5 {
		return "catalog"
	}
	if strings.HasPrefix(path, modulesPath) && strings.Count(path, "/") >= 7 {
		switch {
		case strings.HasSuffix(path, "/versions"):
			return "module_versions"
		case strings.HasSuffix(path, "/download"):
			return "module_download"
		case strings.HasSuffix(path, "/module.zip"):
			return "module_zip"
		}
	}
	rq, err := parsePath(path)
	if err != nil {
		if strings.HasPrefix(path, "/providers/") && strings.Count(path, "/") == 4 {
			return "catalog"
		}
		return "other"
	}
	return [...]string{"index", "version", "archive"}[rq.kind]
}

// entry collects what a handler adds to its request's access-log line.
type entry struct {
	id    string
	mu    sync.Mutex
	attrs []slog.Attr
}

type entryKey struct{}

// note adds attributes to the request's access-log line.
func note(ctx context.Context, attrs ...slog.Attr) {
	if e, ok := ctx.Value(entryKey{}).(*entry); ok {
		e.mu.Lock()
		e.attrs = append(e.attrs, attrs...)
		e.mu.Unlock()
	}
}

// accessLog writes one structured line per request and keeps the request metrics.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rt := route(r.URL.Path)
		s.metrics.inFlight.Inc()
		s.active.Add(1)
		defer func() { s.metrics.inFlight.Dec(); s.active.Add(-1) }()
		e := &entry{id: s.idPre + "-" + strconv.FormatUint(s.idSeq.Add(1), 10)}
		sw := &stallWriter{rc: http.NewResponseController(w), window: s.limits.StallTimeout}
		rw := &recorder{ResponseWriter: w, status: http.StatusOK, stall: sw}
		ctx := context.WithValue(r.Context(), entryKey{}, e)
		next.ServeHTTP(rw, r.WithContext(ctx))
		sw.rearm() // for what the server still flushes once the handler returns
		d := time.Since(start)
		s.metrics.request(rt, rw.status, d)
		if rt == "archive" || rt == "module_zip" {
			s.metrics.archiveBytes.AddInt64(rw.bytes)
		}
		level := slog.LevelInfo
		if rw.status >= 500 {
			level = slog.LevelError
		} else if rw.status >= 400 {
			level = slog.LevelWarn
		}
		attrs := []slog.Attr{
			slog.String("id", e.id), slog.String("method", clip(r.Method, 16)), slog.String("path", clip(r.URL.Path, maxLoggedPath)), slog.Int("status", rw.status),
			slog.Int64("bytes", rw.bytes), slog.Float64("duration_ms", float64(d.Microseconds())/1000),
			slog.String("remote", r.RemoteAddr), slog.String("user_agent", clip(r.UserAgent(), maxLoggedPath)),
		}
		if len(r.URL.Path) > maxLoggedPath {
			attrs = append(attrs, slog.Int("path_length", len(r.URL.Path)))
		}
		e.mu.Lock()
		attrs = append(attrs, e.attrs...)
		e.mu.Unlock()
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

// maxLoggedPath is the most of a path (or user agent) the access log carries.
const maxLoggedPath = 256

// recorder notes the status and counts the bytes of a response, which it writes in chunks under
// the stall deadline (stallWriter).
type recorder struct {
	http.ResponseWriter
	stall   *stallWriter
	status  int
	bytes   int64
	written bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.written {
		r.status, r.written = code, true
	}
	r.stall.rearm()
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.written = true
	n, err := r.stall.write(r.ResponseWriter, p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) ReadFrom(src io.Reader) (int64, error) {
	r.written = true
	n, err := r.stall.readFrom(r.ResponseWriter, src)
	r.bytes += n
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// zipDigestKey names a zip digest in logs.
func zipDigestKey(d digest.Digest) slog.Attr { return slog.String("zip", d.String()) }
