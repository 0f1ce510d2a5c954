package main

import (
	"context"
	"os"

	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/recording"
)

// Factory builds what a command reaches beyond its streams, as gh's cmdutil.Factory does: the
// one registry client every command and service is handed, and the cache. Each function field is
// nil for the real one, so a test swaps a registry, the cache or a login without the network.
type Factory struct {
	// OpenTarget, when set, opens every registry repository or OCI layout the command's registry
	// client opens: a test's registry.
	OpenTarget func(ctx context.Context, ref oci.Ref, opts oci.Options, create bool) (oci.Target, error)
	// OpenCache opens the cache directory, or the default one for "" (cache.Open).
	OpenCache func(dir string) (*cache.Cache, error)
	// Login checks credentials against a registry and stores them (oci.Client.Login).
	Login func(ctx context.Context, host, username, password string, opts oci.Options) error

	// Limits bound what a registry can make the command do: the flags and the environment's,
	// set before the command runs.
	Limits oci.Limits
	// ModuleLimits bound a module walk (lock, init, install, run, save --config): the
	// environment's, zero for the defaults.
	ModuleLimits module.Limits
	// RecordingLimits bound a recording read for replay (OPROV_MAX_RECORDING_*).
	RecordingLimits recording.Limits
}

// registry builds the command's registry client from its flags, the limits and the user agent.
func (f *Factory) registry(flags registryFlags) *oci.Client {
	c := &oci.Client{Options: flags.options(), Limits: f.Limits.WithDefaults(), UserAgent: "oprov/" + currentVersion().Version}
	if os.Getenv("OPROV_DEBUG_HTTP") != "" {
		c.Trace = os.Stderr
	}
	if f.OpenTarget != nil {
		opts, open := c.Options, f.OpenTarget
		c.Dial = func(ctx context.Context, ref oci.Ref, create bool) (oci.Target, error) {
			return open(ctx, ref, opts, create)
		}
	}
	return c
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

func (f *Factory) login(ctx context.Context, host, username, password string, flags registryFlags) error {
	if f.Login != nil {
		return f.Login(ctx, host, username, password, flags.options())
	}
	return f.registry(flags).Login(ctx, host, username, password)
}
