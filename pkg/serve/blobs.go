package serve

import (
	"context"
	"io"
	"log/slog"

	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/source"
)

// ensureZip gives a package's zip in the cache through the cache's one door (cache.PutZip):
// fetched by digest when the cache lacks it (written under a temporary name, checked against its
// digest and size, renamed into place), a cached one re-hashed the first time this process serves
// it and fetched again when it no longer matches (the server's cache repairs). Nothing unchecked is
// ever served and a crash leaves nothing partial. One fetch per zip runs at a time however many
// clients ask, under the registry bound; it is not cancelled when they leave, so the cache still
// fills. With withH1 the zip's h1: is computed too.
func (s *Server) ensureZip(ctx context.Context, pkg *source.Package, withH1 bool) (*cache.Zip, error) {
	key := "zip " + pkg.Zip.String()
	if withH1 {
		key = "h1 " + pkg.Zip.String()
	}
	v, err, _ := s.flight.Do(key, func() (any, error) {
		ctx := context.WithoutCancel(ctx)
		cp := pkg.ForCache(s.metrics)
		cp.Fetch = func(ctx context.Context, w io.Writer) error {
			return s.registry(ctx, func() error { return pkg.Fetch(ctx, w, s.metrics) })
		}
		z, err := s.cfg.Cache.PutZip(ctx, cp, withH1)
		if err == nil && z.Repaired {
			s.log.Error("cached zip was damaged; fetched it again", zipDigestKey(pkg.Zip))
		}
		return z, err
	})
	if err != nil {
		return nil, err
	}
	return v.(*cache.Zip), nil
}

// h1 gives a package's h1: hash. It comes from the source when the source knows it (cached
// version metadata; an index annotation would be read there too), else it is computed from the
// zip once (fetching the zip into the cache) and recorded with the source and in memory.
func (s *Server) h1(ctx context.Context, pkg *source.Package) (string, error) {
	if pkg.H1 != "" {
		return pkg.H1, nil
	}
	if h, ok := s.h1s.Load(pkg.Zip); ok {
		return h.(string), nil
	}
	z, err := s.ensureZip(ctx, pkg, true)
	if err != nil {
		return "", err
	}
	s.h1s.Store(pkg.Zip, z.H1)
	if err := pkg.Learn(z.H1); err != nil {
		s.log.Warn("could not record an h1: hash in the cache", zipDigestKey(pkg.Zip), slog.String("error", err.Error()))
	}
	return z.H1, nil
}
