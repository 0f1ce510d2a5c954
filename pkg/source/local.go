package source

import (
	"context"
	"fmt"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
)

// builtHere is a provider kept as source beside the configuration, whatever its language: it
// offers one version (DevVersion), made for this machine by the cache (Cache.Install, the door
// downloads go in by) from the build its kind describes, kept under a hash of its source tree.
// Each kind of source directory (godir.go, pydir.go, stdiodir.go) gives only its build.
type builtHere struct {
	d      LocalDir
	env    *Env
	build  func(ctx context.Context, env *Env) (*cache.Build, error)
	reused string // how to say the package was found made, for messages
}

func (s *builtHere) Dir() string                                { return s.d.Dir }
func (s *builtHere) ForDisplay(manifest.ProviderAddress) string { return s.d.Dir }

func (s *builtHere) AvailableVersions(context.Context, manifest.ProviderAddress) (versions.List, error) {
	return versions.List{Dev}, nil
}

func (s *builtHere) Platforms(context.Context, manifest.ProviderAddress, versions.Version) ([]manifest.Platform, error) {
	return []manifest.Platform{Host()}, nil
}

func (s *builtHere) PackageFor(ctx context.Context, addr manifest.ProviderAddress, _ versions.Version, platform manifest.Platform) (*cache.Package, error) {
	if platform != Host() {
		return nil, fmt.Errorf("%s is kept as source in %s: it is made for this machine (%s) only, not %s", addr, s.d.Dir, Host(), platform)
	}
	b, err := s.build(ctx, s.env)
	if err != nil {
		return nil, err
	}
	return &cache.Package{Addr: addr, Version: DevVersion, Platform: platform, Build: b, Auth: cache.Authentication{Method: "local"}, Detail: s.reused}, nil
}
