package serve

import (
	"context"
	"fmt"
	"net/http"
	"sort"
)

// The catalog lists modules beside providers: the modules --module-include names exactly, and
// those a client asked for whose versions could be listed, each read through the same listing the
// protocol uses (so what the page shows is what a client is served).

// CatalogModule is one registry module, its versions served (newest first) and refused.
type CatalogModule struct {
	Address   string                 `json:"address"`
	Hostname  string                 `json:"hostname"`
	Namespace string                 `json:"namespace"`
	Name      string                 `json:"name"`
	System    string                 `json:"system"`
	Error     string                 `json:"error,omitempty"`
	Versions  []CatalogModuleVersion `json:"versions"`
	Refused   []RefusedVersion       `json:"refused"`
}

// CatalogModuleVersion is one module version served: its package's manifest and zip.
type CatalogModuleVersion struct {
	Version  string   `json:"version"`
	Manifest string   `json:"manifest_digest"`
	Zip      string   `json:"zip_digest"`
	Size     int64    `json:"size"`
	SignedBy []string `json:"signed_by"`
	Rule     string   `json:"rule,omitempty"`
	Warning  string   `json:"warning,omitempty"`
}

// learnModule adds a module a client asked for to the catalog, and wakes the round.
func (s *Server) learnModule(a ModuleAddress) {
	if s.cfg.CatalogRefresh <= 0 {
		return
	}
	s.mods.mu.Lock()
	_, ok := s.mods.known[a.String()]
	switch {
	case ok:
	case len(s.mods.known) >= maxCatalogProviders:
		s.mods.full = true
	default:
		s.mods.known[a.String()] = a
	}
	s.mods.mu.Unlock()
	if !ok {
		select {
		case s.cat.kick <- struct{}{}:
		default:
		}
	}
}

// knownModules gives the modules the catalog lists, sorted, and whether some were left out.
func (s *Server) knownModules() ([]ModuleAddress, bool) {
	s.mods.mu.Lock()
	defer s.mods.mu.Unlock()
	if m := s.cfg.Modules; m != nil {
		for _, p := range m.Include {
			if a, ok := p.Exact(); ok && len(s.mods.known) < maxCatalogProviders {
				s.mods.known[a.String()] = a
			}
		}
	}
	out := make([]ModuleAddress, 0, len(s.mods.known))
	for _, a := range s.mods.known {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, s.mods.full
}

// catalogModules reads every module the catalog lists.
func (s *Server) catalogModules(ctx context.Context) ([]CatalogModule, bool) {
	out := []CatalogModule{}
	if s.cfg.Modules == nil {
		return out, false
	}
	addrs, full := s.knownModules()
	for _, a := range addrs {
		if ctx.Err() != nil {
			return nil, full
		}
		out = append(out, s.catalogModule(ctx, a))
	}
	return out, full
}

func (s *Server) catalogModule(ctx context.Context, a ModuleAddress) CatalogModule {
	m := CatalogModule{Address: a.String(), Hostname: a.Hostname, Namespace: a.Namespace, Name: a.Name, System: a.System,
		Versions: []CatalogModuleVersion{}, Refused: []RefusedVersion{}}
	l := s.moduleListing(ctx, a)
	if l.err != nil {
		m.Error = reasons[classify(l.err).reason]
		return m
	}
	for _, v := range l.versions {
		layer := v.Resolved.Layer()
		m.Versions = append(m.Versions, CatalogModuleVersion{Version: v.Version, Manifest: v.Resolved.Manifest.Digest.String(),
			Zip: layer.Digest.String(), Size: layer.Size, SignedBy: v.SignedBy, Rule: v.Rule, Warning: v.Warning})
	}
	m.Refused = append(m.Refused, l.refused...)
	return m
}

// serveModulePage answers GET /modules/HOSTNAME/NAMESPACE/NAME/SYSTEM with one module of the
// catalog (?format=json: as JSON).
func (s *Server) serveModulePage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.CatalogRefresh <= 0 {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, fmt.Errorf("the catalog is off (--catalog-refresh 0)"))
		return
	}
	a, err := parseModuleAddress(r.PathValue("host") + "/" + r.PathValue("ns") + "/" + r.PathValue("name") + "/" + r.PathValue("system"))
	if err != nil {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, err)
		return
	}
	c := s.snapshot()
	var one *CatalogModule
	for i := range c.Modules {
		if c.Modules[i].Address == a.String() {
			one = &c.Modules[i]
		}
	}
	if one == nil {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, fmt.Errorf("the catalog holds no module %s", a))
		return
	}
	if wantJSON(r) {
		s.writeCatalogJSON(w, r, one)
		return
	}
	s.renderCatalog(w, r, catalogPage{Title: "Module " + one.Address, Catalog: c, OneModule: one})
}

// CheckModules reads the modules --module-include names exactly, so that a mistyped template or
// an unreachable registry shows at start; it gives each one's problem by address (none: nil). A
// failed reading is not kept: the first request reads again.
func (s *Server) CheckModules(ctx context.Context) map[string]error {
	if s.cfg.Modules == nil {
		return nil
	}
	problems := map[string]error{}
	for _, p := range s.cfg.Modules.Include {
		a, ok := p.Exact()
		if !ok {
			continue
		}
		if l := s.moduleListing(ctx, a); l.err != nil {
			problems[a.String()] = l.err
			s.mods.mu.Lock()
			delete(s.mods.lists, a.String())
			s.mods.mu.Unlock()
		} else if len(l.versions) == 0 {
			problems[a.String()] = fmt.Errorf("no version is served (%d refused)", len(l.refused))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return problems
}
