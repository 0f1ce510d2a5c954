package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/oci"
)

// limitFlags are the bounds every command puts on what a registry can make it do (see
// oci.Limits); the environment's OPROV_* variables set them too, and the flags win.
type limitFlags struct {
	StallTimeout   string
	MaxPackageSize string
}

// registerLimits adds the limit flags to every command, and puts the limits into the context
// every command runs with.
func registerLimits(root *cobra.Command) {
	f := &limitFlags{}
	root.PersistentFlags().StringVar(&f.StallTimeout, "stall-timeout", "", "how long a registry may stay silent (connect, TLS, headers, or a body moving under 1 KiB) before oprov gives up (default 30s, or $"+oci.EnvStallTimeout+")")
	root.PersistentFlags().StringVar(&f.MaxPackageSize, "max-package-size", "", "largest provider package oprov fetches (default 2GiB, or $"+oci.EnvMaxPackageSize+")")
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		l, err := f.limits()
		if err != nil {
			return &usageError{err}
		}
		c.SetContext(oci.WithLimits(c.Context(), l))
		return nil
	}
}

func (f *limitFlags) limits() (oci.Limits, error) {
	l, err := oci.LimitsFromEnv()
	if err != nil {
		return l, err
	}
	if f.StallTimeout != "" {
		if l.StallTimeout, err = oci.ParseDuration(f.StallTimeout); err != nil {
			return l, errors.New(oci.FlagStallTimeout + " " + f.StallTimeout + ": " + err.Error())
		}
	}
	if f.MaxPackageSize != "" {
		if l.MaxPackageSize, err = oci.ParseSize(f.MaxPackageSize); err != nil {
			return l, errors.New(oci.FlagMaxPackageSize + " " + f.MaxPackageSize + ": " + err.Error())
		}
	}
	return l, nil
}

// interrupted says whether a command ended because the user interrupted it (Ctrl-C, SIGTERM).
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, context.Canceled)
}
