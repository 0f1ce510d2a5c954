package serve

import (
	"fmt"
	"strings"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
)

// Template maps a provider address to the OCI repository holding it, as an oci_mirror block's
// repository_template does: HOST/PATH or oci-layout:DIR, with ${hostname}, ${namespace} and
// ${type} filled in per provider. A template without any of them names one repository, which
// holds exactly one provider: its address is then given separately.
type Template struct {
	raw   string
	fixed *manifest.ProviderAddress
}

var templateVars = []string{"${hostname}", "${namespace}", "${type}"}

// ParseTemplate checks a template. address is the provider a template without variables holds
// ("" otherwise).
func ParseTemplate(s, address string) (*Template, error) {
	if err := emptiedByShell(s, "${namespace}/${type}"); err != nil {
		return nil, err
	}
	t := &Template{raw: s}
	vars := false
	rest := s
	for _, v := range templateVars {
		vars = vars || strings.Contains(s, v)
		rest = strings.ReplaceAll(rest, v, "")
	}
	if i := strings.Index(rest, "${"); i >= 0 {
		return nil, fmt.Errorf("template %q: unknown variable at %q (only ${hostname}, ${namespace} and ${type} are known)", s, clip(rest[i:], 20))
	}
	switch {
	case vars && address != "":
		return nil, fmt.Errorf("template %q has variables, so it serves many providers: give no provider address (--address) with it", s)
	case !vars && address == "":
		return nil, fmt.Errorf("%q names one repository, which holds one provider: say which with --address HOST/NAMESPACE/TYPE", s)
	case !vars:
		a, err := manifest.ParseProviderAddress(address)
		if err != nil {
			return nil, err
		}
		t.fixed = &a
	}
	sample := manifest.ProviderAddress{Hostname: "example.com", Namespace: "namespace", Type: "type"}
	if t.fixed != nil {
		sample = *t.fixed
	}
	if _, err := t.expand(sample); err != nil {
		return nil, err
	}
	return t, nil
}

// emptiedByShell recognises a template whose variables a shell replaced with nothing: written in
// double quotes, "reg/providers/${namespace}/${type}" reaches oprov as "reg/providers//". An
// empty path segment (or a path that starts or ends with /) names no repository, so it is always
// that. vars is what such a template usually ends in, for the example of the fix.
func emptiedByShell(s, vars string) error {
	if strings.HasPrefix(s, oci.LayoutScheme) {
		return nil
	}
	_, path, _ := strings.Cut(s, "/")
	if !strings.Contains(s, "//") && !strings.HasSuffix(s, "/") && !strings.HasPrefix(path, "/") && !strings.HasPrefix(s, "/") {
		return nil
	}
	return fmt.Errorf("template %q has an empty path segment: the shell replaced its ${...} variables with nothing, as it does inside double quotes; put the template in single quotes ('%s/%s')",
		s, strings.TrimRight(s, "/"), vars)
}

// HostFromRequest reports whether the template's registry part (the host and port it connects
// to) holds a variable: then a request chooses where the server connects (${namespace} and ${type}
// as much as ${hostname}), and only what --include names may be served (CheckInclude).
func (t *Template) HostFromRequest() bool { return len(t.hostVars()) > 0 }

// hostVars lists the variables in the template's registry part, as the pattern fields that fix
// them.
func (t *Template) hostVars() []string {
	if t == nil || strings.HasPrefix(t.raw, oci.LayoutScheme) {
		return nil
	}
	host, _, _ := strings.Cut(t.raw, "/")
	var vars []string
	for _, v := range templateVars {
		if strings.Contains(host, v) {
			vars = append(vars, v)
		}
	}
	return vars
}

// CheckInclude refuses an include list that lets a request choose any host the server connects
// to: when the template's registry part holds ${hostname}, ${namespace} or ${type}, every pattern
// must name that part of the address (a hostname's port, when one is to be served, spelt out:
// example.com:5000), not *.
func CheckInclude(t *Template, include []string) error {
	vars := t.hostVars()
	if len(vars) == 0 {
		return nil
	}
	if len(include) == 0 {
		return fmt.Errorf("template %q takes the registry host from the request's %s: say which providers may be served with --include HOST/NAMESPACE/TYPE naming the %s (otherwise any request could make the server connect anywhere)",
			t.raw, strings.Join(vars, " and "), partNames(vars))
	}
	for _, s := range include {
		p, err := artifact.ParsePattern(s)
		if err != nil {
			return err
		}
		for _, v := range vars {
			if part := map[string]string{"${hostname}": p.Hostname, "${namespace}": p.Namespace, "${type}": p.Type}[v]; part == "*" {
				return fmt.Errorf("--include %q: template %q takes the registry host from the request's %s, so each pattern must name the %s, not *", s, t.raw, v, partNames([]string{v}))
			}
		}
	}
	return nil
}

// partNames names the address parts that variables stand for.
func partNames(vars []string) string {
	names := make([]string, len(vars))
	for i, v := range vars {
		names[i] = strings.Trim(v, "${}")
	}
	return strings.Join(names, " and ")
}

// Fixed gives the one provider a template without variables holds, or nil.
func (t *Template) Fixed() *manifest.ProviderAddress {
	if t == nil { // a server of modules only
		return nil
	}
	return t.fixed
}

// Repository gives the repository that holds addr, or an error when the template does not serve it.
func (t *Template) Repository(addr manifest.ProviderAddress) (oci.Ref, error) {
	if t == nil {
		return oci.Ref{}, fmt.Errorf("this server serves modules only, no provider such as %s", addr)
	}
	if t.fixed != nil && *t.fixed != addr {
		return oci.Ref{}, fmt.Errorf("%s holds only %s, not %s", t.raw, t.fixed, addr)
	}
	return t.expand(addr)
}

func (t *Template) expand(addr manifest.ProviderAddress) (oci.Ref, error) {
	host := addr.Hostname.String()
	// In a repository path (or a layout's directory) a port's colon becomes "_", as 'oprov load'
	// names the repositories of a bundle: no repository path holds a colon, no hostname a "_".
	inPath := strings.NewReplacer("${hostname}", strings.ReplaceAll(host, ":", "_"), "${namespace}", addr.Namespace, "${type}", addr.Type)
	var s string
	if strings.HasPrefix(t.raw, oci.LayoutScheme) {
		s = inPath.Replace(t.raw)
	} else {
		reg, path, found := strings.Cut(t.raw, "/")
		s = strings.NewReplacer("${hostname}", host, "${namespace}", addr.Namespace, "${type}", addr.Type).Replace(reg)
		if found {
			s += "/" + inPath.Replace(path)
		}
	}
	ref, err := oci.ParseRef(s)
	if err != nil {
		return oci.Ref{}, fmt.Errorf("template %q gives %q for %s: %w", t.raw, s, addr, err)
	}
	if ref.Reference != "" {
		return oci.Ref{}, fmt.Errorf("template %q gives %q for %s, which names a tag or digest: name the repository only (versions are its tags)", t.raw, s, addr)
	}
	return ref, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
