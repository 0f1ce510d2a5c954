package source

import (
	"context"
	"fmt"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
)

// builtHere is a provider kept as source beside the configuration, whatever its language: it
// offers one version (DevVersion), made for this machine on demand by build and cached by a hash
// of its source tree. Each kind of source directory (godir.go, pydir.go) gives only its build.
type builtHere struct {
	d             LocalDir
	env           *Env
	build         func(ctx context.Context, env *Env) (*Built, error)
	fresh, reused string // how to say the package was made, or found made, for messages
}

func (s *builtHere) Dir() string                                { return s.d.Dir }
func (s *builtHere) ForDisplay(manifest.ProviderAddress) string { return s.d.Dir }

func (s *builtHere) AvailableVersions(context.Context, manifest.ProviderAddress) (versions.List, error) {
	return versions.List{Dev}, nil
}

func (s *builtHere) Platforms(context.Context, manifest.ProviderAddress, versions.Version) ([]manifest.Platform, error) {
	return []manifest.Platform{Host()}, nil
}

func (s *builtHere) PackageFor(ctx context.Context, addr manifest.ProviderAddress, _ versions.Version, platform manifest.Platform) (*Package, error) {
	if platform != Host() {
		return nil, fmt.Errorf("%s is kept as source in %s: it is made for this machine (%s) only, not %s", addr, s.d.Dir, Host(), platform)
	}
	b, err := s.build(ctx, s.env)
	if err != nil {
		return nil, err
	}
	detail := s.reused
	if b.Rebuilt {
		detail = s.fresh
	}
	return &Package{Addr: addr, Version: DevVersion, Platform: platform, Executable: b.Executable, Auth: Authentication{Method: "local"}, Detail: detail}, nil
}
