package serve

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/pkg/source"
)

// The catalog is what the mirror serves, for people to look at: every provider it knows of, each
// version with its platforms, sizes and signers, and the versions refused with the reason. It is
// read by a round in the background every CatalogRefresh, through the current generation (so the
// round and the protocol share what they learn), the registry semaphore and the limits; the pages
// are rendered from the last round's snapshot, so no page request calls the registry.
//
// The providers it knows of are the one a fixed template holds, those named in Config.Providers,
// and those a client has asked for whose versions could be listed (so a template with variables
// shows what is in use), at most maxCatalogProviders.

// maxCatalogProviders bounds the providers a catalog round reads.
const maxCatalogProviders = 512

// catalogKickDelay is how long a round waits after a client's request named a provider the
// catalog did not know, so that several such requests make one round.
const catalogKickDelay = 2 * time.Second

// maxReasonLength bounds a refusal's detail on the page.
const maxReasonLength = 512

// Catalog is one round's reading of everything served (the JSON of GET /?format=json).
type Catalog struct {
	// Updated is when the round finished; zero until the first has.
	Updated time.Time `json:"updated"`
	// Policy says whether versions are checked against a trust policy.
	Policy    bool              `json:"policy"`
	Providers []CatalogProvider `json:"providers"`
	// Modules are the registry modules served (modcatalog.go).
	Modules []CatalogModule `json:"modules"`
	// Truncated is set when clients asked for more providers than the catalog keeps.
	Truncated bool `json:"truncated,omitempty"`
	// Protocols says which protocol serves what, and where.
	Protocols CatalogProtocols `json:"protocols"`
}

// CatalogProtocols are the protocols a server speaks, each with its base path ("" when it does
// not speak it).
type CatalogProtocols struct {
	// Mirror is the Provider Network Mirror Protocol's base: every provider version listed.
	Mirror string `json:"network_mirror,omitempty"`
	// Registry is the providers.v1 base of the server's own hostname (its pattern, HOSTNAME
	// standing for any hostname served), and RegistryKeyID the key that signs: only versions
	// marked Registry are listed there.
	Registry      string `json:"provider_registry,omitempty"`
	RegistryKeyID string `json:"provider_registry_key_id,omitempty"`
	// Modules is the modules.v1 base pattern.
	Modules string `json:"module_registry,omitempty"`
}

// CatalogProvider is one provider address, its versions served (newest first) and refused.
type CatalogProvider struct {
	Address   string           `json:"address"`
	Hostname  string           `json:"hostname"`
	Namespace string           `json:"namespace"`
	Type      string           `json:"type"`
	Error     string           `json:"error,omitempty"` // the versions could not be listed
	Versions  []CatalogVersion `json:"versions"`
	Refused   []RefusedVersion `json:"refused"`
}

// CatalogVersion is one version served.
type CatalogVersion struct {
	Version string `json:"version"`
	Index   string `json:"index_digest"`
	// SignedBy are the key names or keyless identities whose signatures verified (empty when no
	// policy applies); Rule is the policy rule that applied.
	SignedBy  []string          `json:"signed_by"`
	Rule      string            `json:"rule,omitempty"`
	Warning   string            `json:"warning,omitempty"` // a warn-mode rule let it through unverified
	Platforms []CatalogPlatform `json:"platforms"`
	// Registry is set when the provider registry (providers.v1) lists the version too: a
	// signature passed the policy and there is a signing key.
	Registry bool `json:"provider_registry"`
}

// CatalogPlatform is one platform's package of a version.
type CatalogPlatform struct {
	Platform string `json:"platform"`
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	Zip      string `json:"zip_digest"`
}

// RefusedVersion is a version listed by its repository but not served, and why: Reason is one of
// the server's refusal classes (policy, not_found, registry, digest, too_large), Detail says more
// (for the policy, the check's own words; for others the class's description, never the
// registry's words).
type RefusedVersion struct {
	Version string `json:"version"`
	Reason  string `json:"reason"`
	Detail  string `json:"detail"`
}

// catalogState is the server's catalog: the providers known and the last round's snapshot.
type catalogState struct {
	mu    sync.Mutex
	known map[string]manifest.ProviderAddress
	full  bool
	kick  chan struct{}
	snap  atomic.Pointer[Catalog]
	// rendered is the last snapshot's rendering (catalog_page.go).
	rendered atomic.Pointer[renderedCatalog]
}

func newCatalogState(cfg Config) *catalogState {
	c := &catalogState{known: map[string]manifest.ProviderAddress{}, kick: make(chan struct{}, 1)}
	c.snap.Store(&Catalog{Policy: cfg.Policy != nil, Providers: []CatalogProvider{}, Modules: []CatalogModule{}})
	if a := cfg.Template.Fixed(); a != nil {
		c.known[a.String()] = *a
	}
	for _, a := range cfg.Providers {
		if len(c.known) < maxCatalogProviders {
			c.known[a.String()] = a
		}
	}
	return c
}

// learn adds a provider a client asked for (once its versions were listed), and wakes the round.
func (c *catalogState) learn(addr manifest.ProviderAddress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[addr.String()]; ok {
		return
	}
	if len(c.known) >= maxCatalogProviders {
		c.full = true
		return
	}
	c.known[addr.String()] = addr
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// addresses gives the providers known, sorted, and whether some were left out.
func (c *catalogState) addresses() ([]manifest.ProviderAddress, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]manifest.ProviderAddress, 0, len(c.known))
	for _, a := range c.known {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, c.full
}

// catalogLoop reads the catalog now and then every CatalogRefresh (sooner when a client names a
// provider the catalog did not know) until ctx ends.
func (s *Server) catalogLoop(ctx context.Context) {
	for {
		s.refreshCatalog(ctx)
		t := time.NewTimer(s.cfg.CatalogRefresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-s.cat.kick:
			t.Stop()
			select {
			case <-ctx.Done():
				return
			case <-time.After(catalogKickDelay):
			}
		}
	}
}

// refreshCatalog reads every known provider and keeps the snapshot, unless ctx ended first (a
// round cut short would show a partial catalog as if it were whole).
func (s *Server) refreshCatalog(ctx context.Context) *Catalog {
	addrs, full := s.cat.addresses()
	g := s.current()
	out := &Catalog{Policy: s.cfg.Policy != nil, Truncated: full, Providers: []CatalogProvider{}, Protocols: s.protocols()}
	for _, a := range addrs {
		if ctx.Err() != nil {
			return nil
		}
		// Like a request's, the work is not cut short by ctx (what a generation learns is shared),
		// only bounded in time; a round still stops between providers when ctx ends.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), registryTimeout)
		pctx = source.WithoutCache(pctx)
		out.Providers = append(out.Providers, s.catalogProvider(pctx, g, a))
		cancel()
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), registryTimeout)
	mods, mfull := s.catalogModules(mctx)
	cancel()
	if mods == nil { // ctx ended during the modules
		return nil
	}
	out.Modules, out.Truncated = mods, out.Truncated || mfull
	out.Updated = time.Now().UTC()
	s.cat.snap.Store(out)
	s.log.Info("catalog read", slog.Int("providers", len(out.Providers)), slog.Int("modules", len(out.Modules)), slog.Bool("truncated", out.Truncated))
	return out
}

// catalogProvider reads one provider: its versions, then each version as VERSION.json would.
func (s *Server) catalogProvider(ctx context.Context, g *generation, addr manifest.ProviderAddress) CatalogProvider {
	p := CatalogProvider{Address: addr.String(), Hostname: addr.Hostname.String(), Namespace: addr.Namespace, Type: addr.Type,
		Versions: []CatalogVersion{}, Refused: []RefusedVersion{}}
	list, err := g.versions(ctx, s, addr)
	if err != nil {
		_, p.Error = s.catalogRefusal(g, err)
		return p
	}
	list = append(versions.List(nil), list...)
	list.Sort()
	served := make([]*CatalogVersion, len(list))
	refused := make([]*RefusedVersion, len(list))
	var eg errgroup.Group
	eg.SetLimit(s.cfg.RegistryConcurrency)
	for i, v := range list {
		eg.Go(func() error {
			cv, err := s.catalogVersion(ctx, g, request{kind: docVersion, addr: addr, version: v})
			if err != nil {
				reason, detail := s.catalogRefusal(g, err)
				refused[i] = &RefusedVersion{Version: v.String(), Reason: reason, Detail: detail}
			} else {
				served[i] = cv
			}
			return nil
		})
	}
	eg.Wait()
	for i := len(list) - 1; i >= 0; i-- { // newest first
		if served[i] != nil {
			p.Versions = append(p.Versions, *served[i])
		} else {
			p.Refused = append(p.Refused, *refused[i])
		}
	}
	return p
}

// catalogVersion resolves (and under a policy verifies) one version and reads each platform's
// package, as serveVersion does: a version VERSION.json would refuse is refused here too.
func (s *Server) catalogVersion(ctx context.Context, g *generation, rq request) (*CatalogVersion, error) {
	platforms, err := s.platforms(ctx, g, rq)
	if err != nil {
		return nil, err
	}
	cv := &CatalogVersion{Version: rq.version.String(), SignedBy: []string{}, Platforms: make([]CatalogPlatform, len(platforms))}
	auth := make([]cache.Authentication, len(platforms))
	var eg errgroup.Group
	for i, p := range platforms {
		eg.Go(func() error {
			pkg, err := s.packageFor(ctx, g, rq, p)
			if err != nil {
				return err
			}
			cv.Platforms[i] = CatalogPlatform{Platform: p.String(), Filename: pkg.Filename, Size: pkg.Size, Zip: pkg.Zip.String()}
			auth[i] = pkg.Auth
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	sort.Slice(cv.Platforms, func(i, j int) bool { return cv.Platforms[i].Platform < cv.Platforms[j].Platform })
	if len(auth) > 0 { // one index, one check: every platform carries the same authentication
		a := auth[0]
		cv.Index, cv.Rule, cv.Warning = a.Subject.String(), a.Rule, clip(a.Warning, maxReasonLength)
		if a.Method == "cosign" {
			for _, k := range a.Keys {
				cv.SignedBy = append(cv.SignedBy, signerName(k))
			}
		}
		if a.Method == "gpg" {
			for _, k := range a.Keys {
				cv.SignedBy = append(cv.SignedBy, "origin key "+k)
			}
		}
		cv.Registry = s.cfg.Signer != nil && a.Warning == "" && (a.Method == "cosign" || a.Method == "gpg" && originFrom(a) != nil)
	}
	return cv, nil
}

// protocols says which protocol serves what, for the catalog.
func (s *Server) protocols() CatalogProtocols {
	var p CatalogProtocols
	if s.cfg.Template != nil {
		p.Mirror = "/"
		if s.cfg.Signer != nil {
			host := s.registryHost
			if host == "" {
				host = "HOSTNAME"
			}
			p.Registry, p.RegistryKeyID = registryPath+host+"/", s.cfg.Signer.KeyID
		}
	}
	if s.cfg.Modules != nil {
		p.Modules = modulesPath + "HOSTNAME/"
	}
	return p
}

// signerName is how the catalog names a signer: a keyless identity as verified, a key by its
// name, or, for a key loaded from a file (--key PATH), by the file's name alone (the catalog is
// for anyone who can reach the mirror; where its keys lie is not).
func signerName(k string) string {
	if strings.Contains(k, " (issuer ") { // sign.CertSigner's form
		return k
	}
	return filepath.Base(k)
}

// catalogRefusal says why a version is not served: the refusal class, and for the policy the
// check's reason, else the class's description. A failure that may pass drops the generation, as
// a request's does.
func (s *Server) catalogRefusal(g *generation, err error) (reason, detail string) {
	rf := classify(err)
	if rf.reason == "registry" || rf.reason == "digest" {
		s.forget(g)
	}
	var se *sign.Error
	if errors.As(err, &se) {
		return rf.reason, clip(se.Reason, maxReasonLength)
	}
	return rf.reason, reasons[rf.reason]
}
