package loader

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/source"
	"github.com/oprov/oprov/pkg/stdiohost"
)

// A provider can be launched outside any configuration ('oprov schema'): an executable, a
// provider source directory (BuildDir), or a version in a repository (FetchRef). These give the
// executable and the address it is reported under when none is given.

// ExecutableAddress is the address an executable outside any registry is reported under:
// local/TYPE, TYPE read from a terraform-provider-TYPE[_...][.exe] name, else "unknown".
func ExecutableAddress(path string) manifest.ProviderAddress {
	return localAddress(strings.SplitN(strings.TrimSuffix(filepath.Base(path), ".exe"), "_", 2)[0])
}

// DirAddress is the address a provider source directory is reported under: local/TYPE, TYPE from
// a terraform-provider-TYPE directory name, else the directory's name itself; a stdio
// provider's manifest says its type.
func DirAddress(dir string) manifest.ProviderAddress {
	base := filepath.Base(dir)
	addr := localAddress("terraform-provider-" + base)
	if t, ok := providerrelease.TypeFromName(base); ok {
		addr.Type = t
	}
	if m, err := stdiohost.ReadManifest(dir); err == nil { // a stdio provider names its type
		addr.Type = m.Type
	}
	return addr
}

func localAddress(name string) manifest.ProviderAddress {
	typ, ok := providerrelease.TypeFromName(name)
	if !ok {
		typ = "unknown"
	}
	return manifest.ProviderAddress{Hostname: manifest.DefaultProviderHost, Namespace: "local", Type: typ}
}

// BuildDir builds a provider source directory (any kind pkg/source knows: a Go module, a Python
// project) for this machine through the cache, as 'oprov run' builds the providers kept as
// source, and gives the executable. at says who asked, for messages.
func BuildDir(ctx context.Context, dir string, addr manifest.ProviderAddress, at string, opts Options) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	src := source.OpenLocal(source.LocalDir{Addr: addr, Dir: abs, At: at}, &source.Env{Cache: opts.Cache, Log: opts.Log})
	pkg, err := src.PackageFor(ctx, addr, source.Dev, source.Host())
	if err != nil {
		return "", err
	}
	in, err := opts.Cache.Install(ctx, pkg, nil, opts.Progress)
	if err != nil {
		return "", err
	}
	return in.Executable, nil
}
