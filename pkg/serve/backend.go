package serve

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
)

// generation is one OCI source and what was learnt through it. Within a generation each tag is
// resolved once and each version listed once; a new generation starts every Refresh, so moved
// tags and new versions show up, while signature checks carry over by index digest
// (source.Verified) and zips by digest (the cache).
type generation struct {
	src  *source.OCI
	born time.Time

	mu    sync.Mutex
	lists map[string]*listing
	// releases are the versions the provider registry found signed (registry.go), by provider
	// and version, at most maxReleases.
	releases map[string]*release
}

type listing struct {
	once sync.Once
	list versions.List
	err  error
}

// current gives the generation to answer a request from, starting a new one when the last is
// older than Refresh.
func (s *Server) current() *generation {
	s.genMu.Lock()
	defer s.genMu.Unlock()
	if s.gen == nil || time.Since(s.gen.born) >= s.cfg.Refresh {
		env := &source.Env{Cache: s.cfg.Cache, Registry: s.cfg.Registry, Log: slogWriter{s.log}}
		src := source.NewOCI(env, s.cfg.Policy, s.cfg.Template.Repository).WithVerified(s.verified)
		s.gen = &generation{src: src, born: time.Now(), lists: map[string]*listing{}}
	}
	return s.gen
}

// forget drops a generation after a failure that may pass (the registry was unreachable, say), so
// that the next request asks again instead of repeating the remembered error.
func (s *Server) forget(g *generation) {
	s.genMu.Lock()
	defer s.genMu.Unlock()
	if s.gen == g {
		s.gen = nil
	}
}

// versions lists a provider's versions once per generation.
func (g *generation) versions(ctx context.Context, s *Server, addr manifest.ProviderAddress) (versions.List, error) {
	g.mu.Lock()
	l, ok := g.lists[addr.String()]
	if !ok {
		l = &listing{}
		g.lists[addr.String()] = l
	}
	g.mu.Unlock()
	l.once.Do(func() {
		l.err = s.registry(ctx, func() (err error) {
			l.list, err = g.src.AvailableVersions(ctx, addr)
			return err
		})
	})
	return l.list, l.err
}

// registry runs one call to the registry (or layout) within the concurrency bound.
func (s *Server) registry(ctx context.Context, call func() error) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.metrics.registryInFlight.Inc()
	defer func() {
		s.metrics.registryInFlight.Dec()
		<-s.sem
	}()
	return call()
}

// errBusy is a request refused for want of a slot (MaxArchives).
var errBusy = errors.New("every archive slot is taken")

// refusal is why a version or archive is not served: an HTTP status and a metrics reason.
type refusal struct {
	status int
	reason string
}

// classify says what an error from the source means to a client: the policy refused the version
// or the thing does not exist (404), or the registry failed or sent bad bytes (502).
func classify(err error) refusal {
	var se *sign.Error
	var resp *errcode.ErrorResponse
	var le *oci.LimitError
	var lie *h1Error
	var ue *unsignedError
	switch {
	case errors.As(err, &ue):
		return refusal{http.StatusNotFound, "unsigned"}
	case errors.Is(err, errBusy):
		return refusal{http.StatusServiceUnavailable, "busy"}
	case errors.As(err, &le):
		return refusal{http.StatusBadGateway, "too_large"}
	case errors.As(err, &lie):
		return refusal{http.StatusBadGateway, "h1"}
	case errors.As(err, &se):
		return refusal{http.StatusNotFound, "policy"}
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrTrailingData):
		return refusal{http.StatusBadGateway, "digest"}
	case errors.Is(err, errdef.ErrNotFound), errors.Is(err, fs.ErrNotExist),
		errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound:
		return refusal{http.StatusNotFound, "not_found"}
	}
	return refusal{http.StatusBadGateway, "registry"}
}

// slogWriter turns the source's warning lines into log records.
type slogWriter struct {
	log interface{ Warn(string, ...any) }
}

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}

// Check lists the versions of the one provider a template without variables holds, so that a
// mistyped repository or layout shows at start rather than as 404s later. It gives nil for
// templates that serve many providers (there is nothing to list without a request).
func (s *Server) Check(ctx context.Context) (int, error) {
	addr := s.cfg.Template.Fixed()
	if addr == nil {
		return 0, nil
	}
	list, err := s.current().versions(ctx, s, *addr)
	if err != nil {
		s.forget(s.gen)
	}
	return len(list), err
}
