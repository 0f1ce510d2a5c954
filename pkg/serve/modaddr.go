package serve

import (
	"fmt"
	"strings"

	regaddr "github.com/opentofu/registry-address"

	"github.com/oprov/oprov/pkg/oci"
)

// Registry modules (HOSTNAME/NAMESPACE/NAME/SYSTEM, what a module block's source names with a
// version constraint) map to OCI repositories as providers do: through a repository template, here
// with ${hostname}, ${namespace}, ${name} and ${system}. Each repository holds one module; its
// tags are the versions, each an OpenTofu module package (pkg/modulepkg).

// ModuleAddress is a registry module's address, in OpenTofu's normal form.
type ModuleAddress struct{ Hostname, Namespace, Name, System string }

func (a ModuleAddress) String() string {
	return a.Hostname + "/" + a.Namespace + "/" + a.Name + "/" + a.System
}

// parseModuleAddress parses HOSTNAME/NAMESPACE/NAME/SYSTEM as OpenTofu does (the hostname is
// required here; no subdirectory).
func parseModuleAddress(s string) (a ModuleAddress, err error) {
	if strings.Count(s, "/") != 3 || strings.Contains(s, "//") {
		return a, fmt.Errorf("module address %q: want HOSTNAME/NAMESPACE/NAME/SYSTEM", s)
	}
	defer func() { // the parser's display form panics on some hostnames IDNA rejects
		if recover() != nil {
			a, err = ModuleAddress{}, fmt.Errorf("module address %q: invalid hostname", s)
		}
	}()
	m, err := regaddr.ParseModuleSource(s)
	if err != nil {
		return a, fmt.Errorf("module address %q: %w", s, err)
	}
	p := m.Package
	return ModuleAddress{Hostname: p.Host.ForDisplay(), Namespace: p.Namespace, Name: p.Name, System: p.TargetSystem}, nil
}

var moduleTemplateVars = []string{"${hostname}", "${namespace}", "${name}", "${system}"}

// ModuleTemplate maps a registry module address to the repository holding it.
type ModuleTemplate struct{ raw string }

// ParseModuleTemplate checks a module repository template: HOST/PATH or oci-layout:DIR with
// ${namespace}, ${name} and ${system} (each module its own repository) and optionally ${hostname}.
func ParseModuleTemplate(s string) (*ModuleTemplate, error) {
	if err := emptiedByShell(s, "${namespace}/${name}/${system}"); err != nil {
		return nil, fmt.Errorf("module %w", err)
	}
	rest := s
	for _, v := range moduleTemplateVars {
		rest = strings.ReplaceAll(rest, v, "")
	}
	if i := strings.Index(rest, "${"); i >= 0 {
		return nil, fmt.Errorf("module template %q: unknown variable at %q (only ${hostname}, ${namespace}, ${name} and ${system} are known)", s, clip(rest[i:], 20))
	}
	for _, v := range moduleTemplateVars[1:] {
		if !strings.Contains(s, v) {
			return nil, fmt.Errorf("module template %q has no %s: each module needs its own repository, so name ${namespace}, ${name} and ${system} in it", s, v)
		}
	}
	t := &ModuleTemplate{raw: s}
	if _, err := t.Repository(ModuleAddress{"example.com", "namespace", "name", "system"}); err != nil {
		return nil, err
	}
	return t, nil
}

// Repository gives the repository that holds a module.
func (t *ModuleTemplate) Repository(a ModuleAddress) (oci.Ref, error) {
	s := strings.NewReplacer("${hostname}", a.Hostname, "${namespace}", a.Namespace, "${name}", a.Name, "${system}", a.System).Replace(t.raw)
	ref, err := oci.ParseRef(s)
	if err != nil {
		return oci.Ref{}, fmt.Errorf("module template %q gives %q for %s: %w", t.raw, s, a, err)
	}
	if ref.Reference != "" {
		return oci.Ref{}, fmt.Errorf("module template %q gives %q for %s, which names a tag or digest: name the repository only (versions are its tags)", t.raw, s, a)
	}
	return ref, nil
}

// hostVars lists the variables in the template's registry part: a request then chooses where the
// server connects, so only what the include list names may be served (CheckModuleInclude).
func (t *ModuleTemplate) hostVars() []string {
	if strings.HasPrefix(t.raw, oci.LayoutScheme) {
		return nil
	}
	host, _, _ := strings.Cut(t.raw, "/")
	var vars []string
	for _, v := range moduleTemplateVars {
		if strings.Contains(host, v) {
			vars = append(vars, v)
		}
	}
	return vars
}

// ModulePattern is an include pattern: HOSTNAME/NAMESPACE/NAME/SYSTEM, each part a name or "*".
type ModulePattern [4]string

// ParseModulePattern parses a module include pattern.
func ParseModulePattern(s string) (ModulePattern, error) {
	parts := strings.Split(strings.ToLower(s), "/")
	if len(parts) != 4 {
		return ModulePattern{}, fmt.Errorf("module pattern %q: want HOSTNAME/NAMESPACE/NAME/SYSTEM, each part a name or *", s)
	}
	var p ModulePattern
	for i, part := range parts {
		if part == "" || (strings.Contains(part, "*") && part != "*") {
			return ModulePattern{}, fmt.Errorf("module pattern %q: each part must be a name or a lone *", s)
		}
		p[i] = part
	}
	return p, nil
}

// Match reports whether the pattern covers a (names compared without case, as OpenTofu does).
func (p ModulePattern) Match(a ModuleAddress) bool {
	for i, s := range []string{a.Hostname, a.Namespace, a.Name, a.System} {
		if p[i] != "*" && p[i] != strings.ToLower(s) {
			return false
		}
	}
	return true
}

// Exact gives the address a pattern without * names.
func (p ModulePattern) Exact() (ModuleAddress, bool) {
	for _, s := range p {
		if s == "*" {
			return ModuleAddress{}, false
		}
	}
	return ModuleAddress{p[0], p[1], p[2], p[3]}, true
}

// CheckModuleInclude refuses include patterns that would let a request choose any host the server
// connects to (see CheckInclude), and gives the parsed patterns.
func CheckModuleInclude(t *ModuleTemplate, include []string) ([]ModulePattern, error) {
	var pats []ModulePattern
	for _, s := range include {
		p, err := ParseModulePattern(s)
		if err != nil {
			return nil, err
		}
		pats = append(pats, p)
	}
	vars := t.hostVars()
	if len(vars) > 0 && len(pats) == 0 {
		return nil, fmt.Errorf("module template %q takes the registry host from the request's %s: say which modules may be served with --module-include HOSTNAME/NAMESPACE/NAME/SYSTEM naming the %s", t.raw, strings.Join(vars, " and "), partNames(vars))
	}
	for i, p := range pats {
		for _, v := range vars {
			idx := map[string]int{"${hostname}": 0, "${namespace}": 1, "${name}": 2, "${system}": 3}[v]
			if p[idx] == "*" {
				return nil, fmt.Errorf("--module-include %q: module template %q takes the registry host from the request's %s, so each pattern must name the %s, not *", include[i], t.raw, v, partNames([]string{v}))
			}
		}
	}
	return pats, nil
}
