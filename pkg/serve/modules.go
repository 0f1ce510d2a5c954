package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// The Module Registry Protocol (modules.v1), for registry modules held as OpenTofu module
// packages in OCI repositories (ModuleTemplate), below modulesPath:
//
//	HOSTNAME/NAMESPACE/NAME/SYSTEM/versions            the versions (under a policy, those that verify)
//	HOSTNAME/NAMESPACE/NAME/SYSTEM/VERSION/download    204, X-Terraform-Get: the zip below
//	HOSTNAME/NAMESPACE/NAME/SYSTEM/VERSION/module.zip  the module package's zip, digest checked
//
// and service discovery at /.well-known/terraform.json for the server's own hostname. The protocol
// has no hostname in its paths (a registry serves its own); here the hostname is the first part of
// the base URL, so one server answers for every hostname the template and --module-include allow,
// each through a host block in the client's CLI configuration (ModuleHostBlocks).

// modulesPath is where the module registry's base URLs begin.
const modulesPath = "/modules/v1/"

// ModuleConfig is what a server serves as a module registry.
type ModuleConfig struct {
	Template *ModuleTemplate
	// Include, when set, limits the modules served (others get 404).
	Include []ModulePattern
	// Hostname is the module hostname /.well-known/terraform.json answers for ("" for none): the
	// hostname clients reach the server by.
	Hostname string
}

// SetModuleHostname sets the hostname service discovery answers modules.v1 for, once the server's
// URL is known (before Run).
func (s *Server) SetModuleHostname(h string) {
	if s.cfg.Modules != nil {
		s.cfg.Modules.Hostname = h
	}
}

// ModuleBaseURL is the modules.v1 base URL of one module hostname on a server at url.
func ModuleBaseURL(url, hostname string) string {
	return trimSlash(url) + modulesPath + hostname + "/"
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

// moduleVersion is one version of a module that passed (or, in warn mode, was let through by)
// the policy, resolved once: what it serves is fetched by this digest, never by the tag again.
type moduleVersion struct {
	Version  string
	Resolved *modulepkg.Resolved
	SignedBy []string
	Rule     string
	Warning  string
}

// moduleListing is one reading of a module's repository.
type moduleListing struct {
	once     sync.Once
	born     time.Time
	ref      oci.Ref
	target   oci.Target
	versions []moduleVersion // newest first
	refused  []RefusedVersion
	err      error
}

// moduleState is what the server learnt of modules: listings (each good for Refresh), the
// modules clients asked for (for the catalog), and zips by digest.
type moduleState struct {
	mu    sync.Mutex
	lists map[string]*moduleListing
	known map[string]ModuleAddress
	full  bool
	zips  zipMemo
	// verified are the manifests whose signatures passed the policy in enforce mode, by digest:
	// a later listing resolves the tags again but checks a known manifest's signatures once.
	verified map[digest.Digest]moduleVersion
}

// maxVerifiedModules bounds the verified manifests remembered (then the memory starts over).
const maxVerifiedModules = 4096

func newModuleState() *moduleState {
	return &moduleState{lists: map[string]*moduleListing{}, known: map[string]ModuleAddress{}, zips: zipMemo{max: 64 << 20},
		verified: map[digest.Digest]moduleVersion{}}
}

// rememberVerified keeps a version whose signatures passed in enforce mode.
func (m *moduleState) rememberVerified(v *moduleVersion) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.verified) >= maxVerifiedModules {
		m.verified = map[digest.Digest]moduleVersion{}
	}
	m.verified[v.Resolved.Manifest.Digest] = *v
}

// knownVerified gives what a verified manifest's check found, if it passed before.
func (m *moduleState) knownVerified(d digest.Digest) (moduleVersion, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.verified[d]
	return v, ok
}

// routeModules adds the module registry's routes.
func (s *Server) routeModules(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/terraform.json", s.serveDiscovery)
	base := "GET " + modulesPath + "{host}/{ns}/{name}/{system}/"
	mux.HandleFunc(base+"versions", s.serveModuleVersions)
	mux.HandleFunc(base+"{version}/download", s.serveModuleDownload)
	mux.HandleFunc(base+"{version}/module.zip", s.serveModuleZip)
	mux.HandleFunc("GET /modules/{host}/{ns}/{name}/{system}", s.serveModulePage)
}

// serveDiscovery answers service discovery for the server's own hostname: modules.v1 when it
// serves modules, providers.v1 when it signs for providers (registry.go).
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	out := map[string]string{}
	if s.cfg.Signer != nil && s.cfg.Template != nil && s.registryHost != "" {
		out["providers.v1"] = registryPath + s.registryHost + "/"
	}
	if m := s.cfg.Modules; m != nil && m.Hostname != "" {
		out["modules.v1"] = modulesPath + m.Hostname + "/"
	}
	writeJSON(w, out)
}

// moduleRequest checks a request's module address against the template and include list.
func (s *Server) moduleRequest(w http.ResponseWriter, r *http.Request) (ModuleAddress, bool) {
	fail := func(err error) (ModuleAddress, bool) {
		s.fail(w, r, refusal{http.StatusNotFound, "not_found"}, err)
		return ModuleAddress{}, false
	}
	m := s.cfg.Modules
	if m == nil {
		return fail(fmt.Errorf("this server serves no modules (no module template)"))
	}
	a, err := parseModuleAddress(r.PathValue("host") + "/" + r.PathValue("ns") + "/" + r.PathValue("name") + "/" + r.PathValue("system"))
	if err != nil {
		return fail(err)
	}
	if len(m.Include) > 0 && !matchModule(m.Include, a) {
		return fail(fmt.Errorf("this server does not serve the module %s", a))
	}
	if _, err := m.Template.Repository(a); err != nil {
		return fail(err)
	}
	return a, true
}

func matchModule(pats []ModulePattern, a ModuleAddress) bool {
	for _, p := range pats {
		if p.Match(a) {
			return true
		}
	}
	return false
}

// moduleContext is a request's registry context: not cut short when the client leaves (what a
// listing learns is shared), bounded in time instead.
func moduleContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), registryTimeout)
}

// serveModuleVersions lists the versions that verify (all that are module packages without a
// policy); refused ones go to the access log.
func (s *Server) serveModuleVersions(w http.ResponseWriter, r *http.Request) {
	a, ok := s.moduleRequest(w, r)
	if !ok {
		return
	}
	ctx, cancel := moduleContext(r)
	defer cancel()
	l := s.moduleListing(ctx, a)
	if l.err != nil {
		s.failModule(w, r, a, l.err)
		return
	}
	s.learnModule(a)
	if len(l.refused) > 0 {
		note(ctx, slog.Any("hidden", l.refused))
	}
	type version struct {
		Version string `json:"version"`
	}
	vs := make([]version, 0, len(l.versions))
	for _, v := range l.versions {
		vs = append(vs, version{v.Version})
	}
	writeJSON(w, map[string]any{"modules": []any{map[string]any{"versions": vs}}})
}

// serveModuleDownload answers 204 with X-Terraform-Get naming the version's zip on this server.
func (s *Server) serveModuleDownload(w http.ResponseWriter, r *http.Request) {
	a, ok := s.moduleRequest(w, r)
	if !ok {
		return
	}
	ctx, cancel := moduleContext(r)
	defer cancel()
	if _, _, err := s.moduleVersionFor(ctx, a, r.PathValue("version")); err != nil {
		s.failModule(w, r, a, err)
		return
	}
	w.Header().Set("X-Terraform-Get", modulesPath+a.String()+"/"+r.PathValue("version")+"/module.zip")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusNoContent)
}

// serveModuleZip sends a version's zip, fetched by the digest its verified manifest names and
// checked, within the package size limit and an archive slot.
func (s *Server) serveModuleZip(w http.ResponseWriter, r *http.Request) {
	a, ok := s.moduleRequest(w, r)
	if !ok {
		return
	}
	ctx, cancel := moduleContext(r)
	defer cancel()
	data, layer, err := s.moduleZip(ctx, a, r.PathValue("version"))
	if err != nil {
		s.failModule(w, r, a, err)
		return
	}
	release, ok := s.archiveSlot(r.Context())
	if !ok {
		w.Header().Set("Retry-After", "1")
		s.failModule(w, r, a, errBusy)
		return
	}
	defer release()
	note(ctx, zipDigestKey(layer))
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("ETag", `"`+layer.String()+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// moduleZip gives a served version's zip, from memory or the registry.
func (s *Server) moduleZip(ctx context.Context, a ModuleAddress, version string) ([]byte, digest.Digest, error) {
	v, l, err := s.moduleVersionFor(ctx, a, version)
	if err != nil {
		return nil, "", err
	}
	layer := v.Resolved.Layer()
	limits := s.cfg.Registry.Bounds()
	if err := limits.CheckBlobSize("the module "+a.String()+" "+version, layer.Size); err != nil {
		return nil, "", err
	}
	if data, ok := s.mods.zips.get(layer.Digest); ok {
		return data, layer.Digest, nil
	}
	var data []byte
	err = s.registry(ctx, func() (err error) {
		data, err = v.Resolved.FetchZip(ctx, l.target, limits.MaxPackageSize)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	s.mods.zips.put(layer.Digest, data)
	return data, layer.Digest, nil
}

// moduleVersionFor finds a served version of a module, and the listing it is in.
func (s *Server) moduleVersionFor(ctx context.Context, a ModuleAddress, version string) (*moduleVersion, *moduleListing, error) {
	if _, err := canonicalVersion(version); err != nil {
		return nil, nil, fmt.Errorf("module %s version %q: %v: %w", a, version, err, os.ErrNotExist)
	}
	l := s.moduleListing(ctx, a)
	if l.err != nil {
		return nil, nil, l.err
	}
	for i := range l.versions {
		if l.versions[i].Version == version {
			return &l.versions[i], l, nil
		}
	}
	for _, rv := range l.refused {
		if rv.Version == version {
			return nil, nil, &sign.Error{Ref: l.ref.WithReference(version), Reason: rv.Reason + ": " + rv.Detail}
		}
	}
	return nil, nil, fmt.Errorf("module %s has no version %s: %w", a, version, os.ErrNotExist)
}

// failModule answers a refused module request as the provider protocol's are answered, and drops
// the listing after a failure that may pass.
func (s *Server) failModule(w http.ResponseWriter, r *http.Request, a ModuleAddress, err error) {
	rf := classify(err)
	if rf.reason == "registry" || rf.reason == "digest" {
		s.mods.mu.Lock()
		delete(s.mods.lists, a.String())
		s.mods.mu.Unlock()
	}
	s.fail(w, r, rf, err)
}

// moduleListing gives a module's listing, read at most once per Refresh.
func (s *Server) moduleListing(ctx context.Context, a ModuleAddress) *moduleListing {
	s.mods.mu.Lock()
	l, ok := s.mods.lists[a.String()]
	if !ok || time.Since(l.born) >= s.cfg.Refresh {
		l = &moduleListing{born: time.Now()}
		s.mods.lists[a.String()] = l
	}
	s.mods.mu.Unlock()
	l.once.Do(func() { l.err = s.readModule(ctx, a, l) })
	return l
}

// readModule lists a module repository's version tags and resolves each (under a policy, checks
// its signatures), a few at a time within the registry bound.
func (s *Server) readModule(ctx context.Context, a ModuleAddress, l *moduleListing) error {
	ref, err := s.cfg.Modules.Template.Repository(a)
	if err != nil {
		return err
	}
	l.ref = ref
	err = s.registry(ctx, func() (err error) {
		l.target, err = s.cfg.Registry.Open(ctx, ref, false)
		return err
	})
	if err != nil {
		return err
	}
	var tags []manifest.TaggedVersion
	err = s.registry(ctx, func() (err error) {
		tags, err = artifact.ListVersions(ctx, l.target, s.cfg.Registry.Bounds())
		return err
	})
	if err != nil {
		return err
	}
	served := make([]*moduleVersion, len(tags))
	refused := make([]*RefusedVersion, len(tags))
	var eg errgroup.Group
	eg.SetLimit(s.cfg.RegistryConcurrency)
	for i, tv := range tags {
		eg.Go(func() error {
			v, err := s.checkModuleVersion(ctx, l, tv)
			if err != nil {
				reason, detail := moduleRefusal(err)
				refused[i] = &RefusedVersion{Version: tv.Version.String(), Reason: reason, Detail: detail}
				s.metrics.refused(reason)
			}
			served[i] = v
			return nil
		})
	}
	eg.Wait()
	for i := range tags { // VersionTags gives the highest first
		if served[i] != nil {
			l.versions = append(l.versions, *served[i])
		} else {
			l.refused = append(l.refused, *refused[i])
		}
	}
	return nil
}

// checkModuleVersion resolves one tag to a module package and, under a policy, checks it.
func (s *Server) checkModuleVersion(ctx context.Context, l *moduleListing, tv manifest.TaggedVersion) (*moduleVersion, error) {
	ref := l.ref.WithReference(tv.Tag)
	var m *modulepkg.Resolved
	err := s.registry(ctx, func() (err error) {
		m, err = modulepkg.Resolve(ctx, l.target, tv.Tag)
		return err
	})
	if err != nil {
		return nil, err
	}
	v := &moduleVersion{Version: tv.Version.String(), Resolved: m, SignedBy: []string{}}
	if s.cfg.Policy == nil {
		return v, nil
	}
	if known, ok := s.mods.knownVerified(m.Manifest.Digest); ok && known.Version == v.Version {
		v.SignedBy, v.Rule = known.SignedBy, known.Rule
		return v, nil
	}
	var d *sign.Decision
	err = s.registry(ctx, func() (err error) {
		d, err = sign.DecideModule(ctx, l.target, ref, m, s.cfg.Policy, sign.VerifyOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	v.Rule = d.Rule
	if d.Warning != nil {
		v.Warning = clip(d.Warning.Error(), maxReasonLength)
	}
	if d.Result != nil {
		for _, sig := range d.Result.Signatures {
			v.SignedBy = append(v.SignedBy, signerName(sig.By()))
		}
	}
	if d.Warning == nil && d.Result != nil {
		s.mods.rememberVerified(v)
	}
	return v, nil
}

// moduleRefusal says why a module version is not served, as catalogRefusal does for providers.
func moduleRefusal(err error) (reason, detail string) {
	var se *sign.Error
	var nm *modulepkg.NotModuleError
	switch {
	case errors.As(err, &se):
		return "policy", clip(se.Reason, maxReasonLength)
	case errors.As(err, &nm):
		return "not_module", clip(nm.Error(), maxReasonLength)
	}
	rf := classify(err)
	return rf.reason, reasons[rf.reason]
}

// zipMemo keeps module zips by digest, at most max bytes, the oldest dropped first.
type zipMemo struct {
	mu    sync.Mutex
	max   int
	size  int
	order []digest.Digest
	m     map[digest.Digest][]byte
}

func (z *zipMemo) get(d digest.Digest) ([]byte, bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	b, ok := z.m[d]
	return b, ok
}

func (z *zipMemo) put(d digest.Digest, b []byte) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(b) > z.max/4 {
		return
	}
	if z.m == nil {
		z.m = map[digest.Digest][]byte{}
	}
	if _, ok := z.m[d]; ok {
		return
	}
	for z.size+len(b) > z.max && len(z.order) > 0 {
		z.size -= len(z.m[z.order[0]])
		delete(z.m, z.order[0])
		z.order = z.order[1:]
	}
	z.m[d], z.size, z.order = b, z.size+len(b), append(z.order, d)
}
