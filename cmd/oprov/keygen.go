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
	output outputFlag
}

func newKeygenCmd(ios *IOStreams) *cobra.Command {
	o := &keygenOptions{io: ios}
	c := &cobra.Command{
		Use:   "keygen",
		Short: "Write a signing key pair that cosign can use",
		Long: `Write PREFIX.key (an encrypted sigstore private key; password from COSIGN_PASSWORD or a
prompt) and PREFIX.pub (PEM), the same files 'cosign generate-key-pair' writes. Existing files
are never overwritten.`,
		Example: `  COSIGN_PASSWORD=... oprov keygen
  oprov keygen --output-key-prefix keys/acme -o json`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runKeygen(c.Context(), o) },
	}
	c.Flags().StringVar(&o.Prefix, "output-key-prefix", "cosign", "write PREFIX.key and PREFIX.pub")
	o.output.register(c)
	return c
}

func runKeygen(_ context.Context, o *keygenOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	key, pub, err := sign.GenerateKeyPair(o.Prefix, passwordFunc(o.io))
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, map[string]string{"private_key": key, "public_key": pub})
	}
	fmt.Fprintf(o.io.Out, "Private key written to %s\nPublic key written to %s\n", key, pub)
	return nil
}
