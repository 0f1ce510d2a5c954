package manifest

import (
	"strings"
	"testing"
)

// Addresses are OpenTofu's: normalised by its parser, and refused where it refuses them, or where
// it would have to guess a namespace.
func TestParseProviderAddress(t *testing.T) {
	a, err := ParseProviderAddress("Example.com/Acme/Hello")
	if err != nil || a.String() != "example.com/acme/hello" {
		t.Errorf("got %v, %v", a, err)
	}
	for _, bad := range []string{"x", "a/b/c/d", "acme/*", "", "acme/-hello"} {
		if _, err := ParseProviderAddress(bad); err == nil || !strings.Contains(err.Error(), "NAMESPACE/TYPE") {
			t.Errorf("%q: want an error that says what is wanted, got %v", bad, err)
		}
	}
}

// Whatever ParseProviderAddress accepts prints and parses back as itself, and nothing panics.
func FuzzParseProviderAddress(f *testing.F) {
	for _, s := range []string{"example.com/acme/hello", "acme/hello", "Example.COM/Acme/Hello", "x", "a/b/c/d", "xn--/a/b", "\xff/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseProviderAddress(s)
		if err != nil {
			return
		}
		again, err := ParseProviderAddress(a.String())
		if err != nil || again != a {
			t.Fatalf("%q parsed as %v, which reads back as %v, %v", s, a, again, err)
		}
	})
}
