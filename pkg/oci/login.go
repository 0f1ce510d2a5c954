package oci

import (
	"context"
	"errors"
	"fmt"
	"os"

	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// Login checks a user name and password against a registry and, when the registry accepts them,
// stores them in the credential store that CredentialStore(c.RegistryConfig) opens, where docker
// and other OCI tools read them.
func (c *Client) Login(ctx context.Context, host, username, password string) error {
	reg, err := c.registry(ctx, host)
	if err != nil {
		return err
	}
	store, err := CredentialStore(c.RegistryConfig)
	if err != nil {
		return err
	}
	cred := auth.Credential{Username: username, Password: password}
	if err := credentials.Login(ctx, store, reg, cred); err != nil {
		return Explain("login", Ref{Registry: host}, err)
	}
	return nil
}

// Logout removes a registry's credentials from the store that CredentialStore(configPath) opens.
// Credentials that are not there are not an error.
func Logout(ctx context.Context, host, configPath string) error {
	store, err := CredentialStore(configPath)
	if err != nil {
		return err
	}
	if err := credentials.Logout(ctx, store, host); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("logout %s: %w", host, err)
	}
	return nil
}
