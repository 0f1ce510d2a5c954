package serve

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/pkg/release"
	"github.com/oprov/oprov/pkg/source"
)

// ensureBlob gives the cache path of a package's zip, fetching it from the registry when the cache
// lacks it. The zip is written under a temporary name, checked against its digest and size, and
// renamed into place (pkg/cache), so nothing unchecked is ever served and a crash leaves nothing
// partial. One fetch per zip runs at a time however many clients ask; it is not cancelled when
// they leave, so the cache still fills. hit reports whether the cache had it.
func (s *Server) ensureBlob(ctx context.Context, pkg *source.Package) (path string, hit bool, err error) {
	c := s.cfg.Cache
	if c.HasBlob(pkg.Zip) {
		if err := s.checkCached(pkg.Zip); err == nil {
			return c.BlobPath(pkg.Zip), true, nil
		}
	}
	v, err, _ := s.flight.Do("blob "+pkg.Zip.String(), func() (any, error) {
		ctx := context.WithoutCancel(ctx)
		var path string
		err := s.registry(ctx, func() (err error) {
			path, err = c.PutBlob(ctx, pkg.Zip, pkg.Size, func(w io.Writer) error {
				return pkg.Fetch(ctx, w, s.metrics)
			})
			return err
		})
		if err == nil {
			s.checked.Store(pkg.Zip, true) // just checked on its way in
		}
		return path, err
	})
	if err != nil {
		return "", false, err
	}
	return v.(string), false, nil
}

// checkCached re-hashes a cached zip the first time this process serves it, since files on disk
// can change under a long-running server. A zip that no longer matches is removed, to be fetched
// again.
func (s *Server) checkCached(d digest.Digest) error {
	if _, ok := s.checked.Load(d); ok {
		return nil
	}
	_, err, _ := s.flight.Do("check "+d.String(), func() (any, error) {
		err := s.cfg.Cache.CheckBlob(d)
		if err == nil {
			s.checked.Store(d, true)
			return nil, nil
		}
		s.log.Error("cached zip is damaged; fetching it again", zipDigestKey(d), slog.String("error", err.Error()))
		os.Remove(s.cfg.Cache.BlobPath(d))
		return nil, err
	})
	return err
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
	v, err, _ := s.flight.Do("h1 "+pkg.Zip.String(), func() (any, error) {
		path, _, err := s.ensureBlob(ctx, pkg)
		if err != nil {
			return "", err
		}
		h1, err := release.HashZipH1(path)
		if err != nil {
			return "", err
		}
		s.h1s.Store(pkg.Zip, h1)
		if pkg.RecordH1 != nil {
			if err := pkg.RecordH1(h1); err != nil {
				s.log.Warn("could not record an h1: hash in the cache", zipDigestKey(pkg.Zip), slog.String("error", err.Error()))
			}
		}
		return h1, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}
