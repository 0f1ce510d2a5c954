package artifact

import (
	"testing"

	"github.com/oprov/oprov/manifest"
)

// TestMatchAny: patterns as OpenTofu's include/exclude have them (NS/TYPE on the default host, *
// per part); no patterns is no filter; a bad one is an error.
func TestMatchAny(t *testing.T) {
	if m, err := MatchAny(nil); m != nil || err != nil {
		t.Errorf("no patterns: a filter (%v), want none", err)
	}
	m, err := MatchAny([]string{"example.com/acme/*", "hashicorp/null"})
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"example.com/acme/hello":                 true,
		"example.com/other/hello":                false,
		"hashicorp/null":                         true,
		"registry.opentofu.org/hashicorp/null":   true,
		"registry.opentofu.org/hashicorp/random": false,
	} {
		a, err := manifest.ParseProviderAddress(addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := m(a); got != want {
			t.Errorf("%s: %v, want %v", addr, got, want)
		}
	}
	for _, bad := range []string{"a*/b", "*/acme/x", "one", "a/b/c/d"} {
		if _, err := MatchAny([]string{"x/y", bad}); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
