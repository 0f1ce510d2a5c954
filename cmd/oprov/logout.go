package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/oci"
)

type logoutOptions struct {
	io       *IOStreams
	Host     string
	registry registryFlags
}

func newLogoutCmd(ios *IOStreams) *cobra.Command {
	o := &logoutOptions{io: ios}
	c := &cobra.Command{
		Use:   "logout HOST",
		Short: "Remove a registry's stored credentials",
		Args:  argsRange(1, 1, "one registry host"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Host = args[0]
			return runLogout(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.registry.RegistryConfig, "registry-config", "", "docker-style credentials file (default: docker's config.json)")
	return c
}

func runLogout(ctx context.Context, o *logoutOptions) error {
	if err := oci.Logout(ctx, o.Host, o.registry.RegistryConfig); err != nil {
		return err
	}
	fmt.Fprintf(o.io.Out, "Removed the credentials for %s\n", o.Host)
	return nil
}
