package serve

import (
	"context"
	"io"
	"log/slog"

	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
)

// ensureZip gives a package's zip in the cache through the cache's one door (cache.PutZip):
// fetched by digest when the cache lacks it (written under a temporary name, checked against its
// digest and size, renamed into place), a cached one re-hashed the first time this process serves
// it and fetched again when it no longer matches (the server's cache repairs). Nothing unchecked is
// ever served and a crash leaves nothing partial. One fetch per zip runs at a time however many
// clients ask, under the registry bound; it is not cancelled when they leave, so the cache still
// fills. With withH1 the zip's h1: is computed too.
func (s *Server) ensureZip(ctx context.Context, pkg *cache.Package, withH1 bool) (*cache.Zip, error) {
	key := "zip " + pkg.Zip.String()
	if withH1 {
		key = "h1 " + pkg.Zip.String()
	}
	v, err, _ := s.flight.Do(key, func() (any, error) {
		ctx := context.WithoutCancel(ctx)
		cp := *pkg
		cp.Fetch = func(ctx context.Context, w io.Writer, progress oci.Progress) error {
			return s.registry(ctx, func() error { return pkg.Fetch(ctx, w, progress) })
		}
		z, err := s.cfg.Cache.PutZip(ctx, &cp, withH1, s.metrics)
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

// h1Error is an h1: hash the source stated (a version's annotation, a cached record) that the zip
// it names does not hash to.
type h1Error struct {
	zip            string
	stated, actual string
}

func (e *h1Error) Error() string {
	return "zip " + e.zip + " hashes to " + e.actual + " but its source states " + e.stated
}

// h1 gives a package's h1: hash, only ever one computed from its zip: computed once per zip digest
// (fetching the zip into the cache) and remembered. An h1: the source states (an index
// annotation, cached metadata) is checked against it, never served on its word: one that
// disagrees is refused and logged.
func (s *Server) h1(ctx context.Context, pkg *cache.Package) (string, error) {
	var h1 string
	if h, ok := s.h1s.Load(pkg.Zip); ok {
		h1 = h.(string)
	} else {
		// Hashed without the stated h1:, so that a lie is told apart from a damaged zip.
		plain := *pkg
		plain.H1 = ""
		z, err := s.ensureZip(ctx, &plain, true)
		if err != nil {
			return "", err
		}
		h1 = z.H1
		s.h1s.Store(pkg.Zip, h1)
		pkg.Learn(h1)
	}
	if pkg.H1 != "" && pkg.H1 != h1 {
		s.log.Error("refused a lying h1: hash", zipDigestKey(pkg.Zip), slog.String("provider", pkg.Addr.String()),
			slog.String("version", pkg.Version), slog.String("platform", pkg.Platform.String()),
			slog.String("stated", pkg.H1), slog.String("actual", h1))
		return "", &h1Error{zip: pkg.Zip.String(), stated: pkg.H1, actual: h1}
	}
	return h1, nil
}
