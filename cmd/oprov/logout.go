package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/oprov/oprov/pkg/oci"
)

type logoutOptions struct {
	io       *IOStreams
	Host     string
	registry registryFlags
	output   outputFlag
}

func newLogoutCmd(ios *IOStreams) *cobra.Command {
	o := &logoutOptions{io: ios}
	c := &cobra.Command{
		Use:   "logout HOST",
		Short: "Remove a registry's stored credentials",
		Long: `Remove the credentials stored for a registry where 'oprov login' (and docker) store them, and
say whether there were any. Credentials that other tools keep elsewhere (containers' auth.json,
read as a fallback) are reported, not removed.`,
		Example: `  oprov logout ghcr.io
  oprov logout registry.example.com --registry-config ./ci-auth.json -o json`,
		Args: argsRange(1, 1, "one registry host"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Host = args[0]
			return runLogout(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.registry.RegistryConfig, "registry-config", "", "docker-style credentials file (default: docker's config.json)")
	o.output.register(c)
	return c
}

func runLogout(ctx context.Context, o *logoutOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	before, err := storedCredential(ctx, o.Host, o.registry.RegistryConfig)
	if err != nil {
		return err
	}
	if err := oci.Logout(ctx, o.Host, o.registry.RegistryConfig); err != nil {
		return err
	}
	after, err := storedCredential(ctx, o.Host, o.registry.RegistryConfig)
	if err != nil {
		return err
	}
	removed, remain := before != auth.EmptyCredential && before != after, after != auth.EmptyCredential
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Host    string `json:"host"`
			Removed bool   `json:"removed"`
			Remain  bool   `json:"credentials_remain"`
		}{o.Host, removed, remain})
	}
	switch {
	case removed:
		fmt.Fprintf(o.io.Out, "Removed the credentials for %s\n", o.Host)
	case !remain:
		fmt.Fprintf(o.io.Out, "No credentials were stored for %s: nothing to remove\n", o.Host)
	}
	if remain {
		fmt.Fprintf(o.io.Out, "Credentials for %s are still stored by another tool (such as containers' auth.json): remove them with that tool, e.g. 'podman logout %s'\n", o.Host, o.Host)
	}
	return nil
}

// storedCredential reads what the credential stores hold for host now (a fresh read each time).
func storedCredential(ctx context.Context, host, configPath string) (auth.Credential, error) {
	store, err := oci.CredentialStore(configPath)
	if err != nil {
		return auth.EmptyCredential, err
	}
	c, err := store.Get(ctx, host)
	if err != nil {
		return auth.EmptyCredential, fmt.Errorf("logout %s: reading the stored credentials: %w", host, err)
	}
	return c, nil
}
