package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"oras.land/oras-go/v2/registry/remote/credentials"

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
	store, err := oci.CredentialStore(o.registry.RegistryConfig)
	if err != nil {
		return err
	}
	if err := credentials.Logout(ctx, store, o.Host); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("logout %s: %w", o.Host, err)
	}
	fmt.Fprintf(o.io.Out, "Removed the credentials for %s\n", o.Host)
	return nil
}
