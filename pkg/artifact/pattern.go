package artifact

import (
	"fmt"
	"strings"

	"github.com/oprov/oprov/manifest"
)

// Pattern is an include/exclude pattern as OpenTofu's CLI configuration has them: HOST/NS/TYPE or
// NS/TYPE (on the default host), each part a name or "*".
type Pattern struct{ Hostname, Namespace, Type string }

// ParsePattern parses a provider address pattern.
func ParsePattern(s string) (Pattern, error) {
	parts := strings.Split(strings.ToLower(s), "/")
	switch len(parts) {
	case 2:
		parts = append([]string{manifest.DefaultProviderHost.String()}, parts...)
	case 3:
	default:
		return Pattern{}, fmt.Errorf("pattern %q: want [HOSTNAME/]NAMESPACE/TYPE, each part a name or *", s)
	}
	for _, p := range parts {
		if p == "" || (strings.Contains(p, "*") && p != "*") {
			return Pattern{}, fmt.Errorf("pattern %q: each part must be a name or a lone *", s)
		}
	}
	if parts[0] == "*" && (parts[1] != "*" || parts[2] != "*") {
		// OpenTofu allows a wildcard hostname only with wildcard namespace and type.
		return Pattern{}, fmt.Errorf("pattern %q: a * hostname needs * namespace and type", s)
	}
	if parts[1] == "*" && parts[2] != "*" {
		return Pattern{}, fmt.Errorf("pattern %q: a * namespace needs a * type", s)
	}
	return Pattern{Hostname: parts[0], Namespace: parts[1], Type: parts[2]}, nil
}

// Match reports whether the pattern covers addr.
func (p Pattern) Match(addr manifest.ProviderAddress) bool {
	m := func(pat, s string) bool { return pat == "*" || pat == s }
	return m(p.Hostname, addr.Hostname.String()) && m(p.Namespace, addr.Namespace) && m(p.Type, addr.Type)
}

func (p Pattern) String() string { return p.Hostname + "/" + p.Namespace + "/" + p.Type }

// MatchAny gives a function that reports whether any of the patterns (ParsePattern) covers an
// address, or nil for no patterns.
func MatchAny(patterns []string) (func(manifest.ProviderAddress) bool, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	var pats []Pattern
	for _, s := range patterns {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, err
		}
		pats = append(pats, p)
	}
	return func(addr manifest.ProviderAddress) bool {
		for _, p := range pats {
			if p.Match(addr) {
				return true
			}
		}
		return false
	}, nil
}
