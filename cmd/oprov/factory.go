package main

import (
	"context"

	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
)

// Factory builds what a command reaches beyond its streams, as gh's cmdutil.Factory does: each
// field is a function, nil for the real one, so a test swaps a registry, the cache or a login
// without the network.
type Factory struct {
	// OpenTarget opens a registry repository or an OCI layout (oci.Open).
	OpenTarget func(ctx context.Context, ref oci.Ref, opts oci.Options, create bool) (oci.Target, error)
	// OpenCache opens the cache directory, or the default one for "" (cache.Open).
	OpenCache func(dir string) (*cache.Cache, error)
	// Login checks credentials against a registry and stores them (oci.Login).
	Login func(ctx context.Context, host, username, password string, opts oci.Options) error
}

func (f *Factory) openTarget(ctx context.Context, ref oci.Ref, opts oci.Options, create bool) (oci.Target, error) {
	if f.OpenTarget != nil {
		return f.OpenTarget(ctx, ref, opts, create)
	}
	return oci.Open(ctx, ref, opts, create)
}

func (f *Factory) openCache(dir string) (*cache.Cache, error) {
	if f.OpenCache != nil {
		return f.OpenCache(dir)
	}
	if dir == "" {
		var err error
		if dir, err = cache.DefaultDir(); err != nil {
			return nil, err
		}
	}
	return cache.Open(dir)
}

func (f *Factory) login(ctx context.Context, host, username, password string, opts oci.Options) error {
	if f.Login != nil {
		return f.Login(ctx, host, username, password, opts)
	}
	return oci.Login(ctx, host, username, password, opts)
}
