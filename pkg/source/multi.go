package source

import (
	"context"
	"fmt"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
)

// Selection is one source of a Multi and the providers it answers for: those Includes says it
// includes (an oci_mirror block's include patterns less its exclude patterns, a provider block's
// one address).
type Selection struct {
	Source   Source
	Includes func(manifest.ProviderAddress) bool
}

// Multi is a Source made of others, as OpenTofu's MultiSource is: each provider is answered by the
// first selection that includes it, as the first installation method that includes a provider
// installs it. A provider no selection includes has no source.
type Multi []Selection

// For gives the source that answers for addr.
func (m Multi) For(addr manifest.ProviderAddress) (Source, error) {
	for _, s := range m {
		if s.Includes(addr) {
			return s.Source, nil
		}
	}
	return nil, fmt.Errorf("%s: no source includes it (no oci_mirror or provider block of oprov.hcl selects it)", addr)
}

func (m Multi) AvailableVersions(ctx context.Context, addr manifest.ProviderAddress) (versions.List, error) {
	s, err := m.For(addr)
	if err != nil {
		return nil, err
	}
	return s.AvailableVersions(ctx, addr)
}

func (m Multi) Platforms(ctx context.Context, addr manifest.ProviderAddress, v versions.Version) ([]manifest.Platform, error) {
	s, err := m.For(addr)
	if err != nil {
		return nil, err
	}
	return s.Platforms(ctx, addr, v)
}

func (m Multi) PackageFor(ctx context.Context, addr manifest.ProviderAddress, v versions.Version, p manifest.Platform) (*cache.Package, error) {
	s, err := m.For(addr)
	if err != nil {
		return nil, err
	}
	return s.PackageFor(ctx, addr, v, p)
}

func (m Multi) ForDisplay(addr manifest.ProviderAddress) string {
	if s, err := m.For(addr); err == nil {
		return s.ForDisplay(addr)
	}
	return addr.String()
}
