package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/sign"
)

type keygenOptions struct {
	io     *IOStreams
	Prefix string
}

func newKeygenCmd(ios *IOStreams) *cobra.Command {
	o := &keygenOptions{io: ios}
	c := &cobra.Command{
		Use:   "keygen",
		Short: "Write a signing key pair that cosign can use",
		Long: `Write PREFIX.key (an encrypted sigstore private key; password from COSIGN_PASSWORD or a
prompt) and PREFIX.pub (PEM), the same files 'cosign generate-key-pair' writes. Existing files
are never overwritten.`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runKeygen(c.Context(), o) },
	}
	c.Flags().StringVar(&o.Prefix, "output-key-prefix", "cosign", "write PREFIX.key and PREFIX.pub")
	return c
}

func runKeygen(_ context.Context, o *keygenOptions) error {
	key, pub, err := sign.GenerateKeyPair(o.Prefix, passwordFunc(o.io))
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(o.io.Out, "Private key written to %s\nPublic key written to %s\n", key, pub)
	return nil
}
