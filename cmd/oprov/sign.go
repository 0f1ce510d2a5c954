package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

type signOptions struct {
	io        *IOStreams
	Ref       string
	Key       string
	LegacyTag bool
	registry  registryFlags
	output    outputFlag
}

func newSignCmd(ios *IOStreams) *cobra.Command {
	o := &signOptions{io: ios}
	c := &cobra.Command{
		Use:   "sign REPO:VERSION --key cosign.key",
		Short: "Sign a provider version with a cosign key",
		Long: `Sign a version's index digest, which covers every platform manifest and zip below it by
content address. The password comes from COSIGN_PASSWORD, or a prompt on a terminal.

By default the signature is stored in cosign's bundle format as an OCI 1.1 referrer of the
index (registries without the referrers API get the referrers-tag fallback), so referrer-aware
copies carry it. --legacy-tag stores it as cosign v2's sha256-<hex>.sig tag instead. Both are
read by 'cosign verify' and 'oprov verify'.`,
		Example: `  COSIGN_PASSWORD=... oprov sign registry.example.com/providers/acme/hello:1.0.0 --key cosign.key`,
		Args:    argsRange(1, 1, "one reference: REPO:VERSION"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Ref = args[0]
			return runSign(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Key, "key", "", "cosign private key file (required)")
	c.Flags().BoolVar(&o.LegacyTag, "legacy-tag", false, "store the signature as cosign v2's sha256-<hex>.sig tag")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runSign(ctx context.Context, o *signOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if o.Key == "" {
		return usageErrorf("sign: --key is required")
	}
	ref, err := parseVersionRef("sign", o.Ref)
	if err != nil {
		return err
	}
	signer, err := sign.LoadSigner(o.Key, passwordFunc(o.io))
	if err != nil {
		return fmt.Errorf("sign %s: %w", ref, err)
	}
	target, err := o.io.Deps.openTarget(ctx, ref, o.registry.options(), false)
	if err != nil {
		return oci.Explain("sign", ref, err)
	}
	v, err := artifact.ResolveVersion(ctx, target, ref)
	if err != nil {
		return oci.Explain("sign", ref, err)
	}
	res, err := sign.Sign(ctx, target, ref, v.Index, signer, sign.SignOptions{Legacy: o.LegacyTag})
	if err != nil {
		return oci.Explain("sign", ref, err)
	}
	return printSigned(o.io, o.output, ref, res)
}

func printSigned(ios *IOStreams, out outputFlag, ref oci.Ref, res *sign.SignResult) error {
	if out.JSON() {
		return writeJSON(ios.Out, res)
	}
	fmt.Fprintf(ios.Out, "Signed %s (%s) as a %s signature: %s\n", ref, res.Subject, res.Form, res.Signature)
	return nil
}
