package source

import (
	"context"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
)

// named is a source that answers with its name.
type named string

func (n named) AvailableVersions(context.Context, manifest.ProviderAddress) (versions.List, error) {
	return versions.List{versions.MustParseVersion("1.0.0")}, nil
}
func (n named) Platforms(context.Context, manifest.ProviderAddress, versions.Version) ([]manifest.Platform, error) {
	return nil, nil
}
func (n named) PackageFor(context.Context, manifest.ProviderAddress, versions.Version, manifest.Platform) (*cache.Package, error) {
	return &cache.Package{Detail: string(n)}, nil
}
func (n named) ForDisplay(manifest.ProviderAddress) string { return string(n) }

// TestMultiFirstSelectionWins: each provider goes to the first selection that includes it, as
// OpenTofu's installation methods do; one no selection includes has no source.
func TestMultiFirstSelectionWins(t *testing.T) {
	addr := func(s string) manifest.ProviderAddress {
		a, err := manifest.ParseProviderAddress(s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	kept := addr("example.com/acme/dev")
	m := Multi{
		{Source: named("dir"), Includes: func(a manifest.ProviderAddress) bool { return a == kept }},
		{Source: named("mirror"), Includes: func(a manifest.ProviderAddress) bool { return a.Namespace == "acme" && a.Type != "legacy" }},
		{Source: named("other"), Includes: func(a manifest.ProviderAddress) bool { return a.Namespace == "acme" }},
	}
	for a, want := range map[string]string{"example.com/acme/dev": "dir", "example.com/acme/hello": "mirror", "example.com/acme/legacy": "other"} {
		if got := m.ForDisplay(addr(a)); got != want {
			t.Errorf("%s answered by %s, want %s", a, got, want)
		}
		pkg, err := m.PackageFor(context.Background(), addr(a), versions.MustParseVersion("1.0.0"), manifest.Platform{})
		if err != nil || pkg.Detail != want {
			t.Errorf("%s package from %v (%v), want %s", a, pkg, err, want)
		}
	}
	if _, err := m.AvailableVersions(context.Background(), addr("example.com/other/x")); err == nil || !strings.Contains(err.Error(), "no source includes it") {
		t.Errorf("a provider no selection includes: %v", err)
	}
}
