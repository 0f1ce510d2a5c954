package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

type signOptions struct {
	io        *IOStreams
	Ref       string
	Key       string
	LegacyTag bool
	// Keyless signing (no --key): an OIDC token exchanged at Fulcio for a certificate, and a TSA.
	keyless  keylessSignFlags
	registry registryFlags
	output   outputFlag
}

func newSignCmd(ios *IOStreams) *cobra.Command {
	o := &signOptions{io: ios}
	c := &cobra.Command{
		Use:   "sign REPO:VERSION [--key cosign.key]",
		Short: "Sign a provider version or a module with a cosign key, or keylessly with a CI identity",
		Long: `Sign a version's index digest, which covers every platform manifest and zip below it by
content address (for a module package, its manifest digest, which covers its zip). The password comes from COSIGN_PASSWORD, or a prompt on a terminal.

By default the signature is stored in cosign's bundle format as an OCI 1.1 referrer of the
index (registries without the referrers API get the referrers-tag fallback), so referrer-aware
copies carry it. --legacy-tag stores it as cosign v2's sha256-<hex>.sig tag instead. Both are
read by 'cosign verify' and 'oprov verify'.

Without --key, the signature is keyless, as cosign signs from CI: a fresh key is made, Fulcio
(--fulcio-url) certifies it for the identity of the OIDC token, a timestamp authority
(--timestamp-server-url) witnesses the signing time, a transparency log (--rekor-url) records
it if wanted, and the key is forgotten. The token is --identity-token, else the CI's own, found
as cosign finds it: SIGSTORE_ID_TOKEN (GitLab CI's id_tokens), else GitHub Actions' token
endpoint (a job with 'permissions: id-token: write'). --signing-config (or
OPROV_SIGNING_CONFIG) reads the URLs from the file cosign v3 reads; with none of them, the
public-good Sigstore instance (fulcio.sigstore.dev, rekor.sigstore.dev) is used. With
--trusted-root, the result is checked against it before it is stored. Verifiers trust the
identity ('oprov verify --certificate-identity ... --certificate-oidc-issuer ... --trusted-root').`,
		Example: `  COSIGN_PASSWORD=... oprov sign registry.example.com/providers/acme/hello:1.0.0 --key cosign.key
  oprov sign registry.example.com/providers/acme/hello:1.0.0      # keyless, in GitHub Actions or GitLab CI
  oprov sign registry.example.com/providers/acme/hello:1.0.0 --signing-config signing_config.json`,
		Args: argsRange(1, 1, "one reference: REPO:VERSION"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Ref = args[0]
			return runSign(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Key, "key", "", "cosign private key file (without it: keyless)")
	o.keyless.register(c, "keyless: ")
	c.Flags().BoolVar(&o.LegacyTag, "legacy-tag", false, "store the signature as cosign v2's sha256-<hex>.sig tag")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runSign(ctx context.Context, o *signOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	keyless := o.Key == ""
	if keyless && o.Key == "" && o.LegacyTag {
		return usageErrorf("sign: keyless signatures are stored as bundles only (cosign v3's form, which cosign v2 with --new-bundle-format reads too): drop --legacy-tag")
	}
	if o.Key != "" && o.keyless.set() {
		return usageErrorf("sign: give --key or the keyless flags (--identity-token, --fulcio-url, --timestamp-server-url, --signing-config), not both")
	}
	ref, err := parseVersionRef("sign", o.Ref)
	if err != nil {
		return err
	}
	var signer *sign.Signer
	opts := sign.SignOptions{Legacy: o.LegacyTag}
	if keyless {
		if opts.Keyless, err = o.keyless.keyless(ctx, "sign "+ref.String()); err != nil {
			return err
		}
	} else if signer, err = sign.LoadSigner(o.Key, passwordFunc(o.io)); err != nil {
		return fmt.Errorf("sign %s: %w", ref, err)
	}
	target, err := o.io.Factory.registry(o.registry).Open(ctx, ref, false)
	if err != nil {
		return oci.Explain("sign", ref, err)
	}
	subject, err := signSubject(ctx, target, ref, o.io.Factory.Limits) // a provider's index, or a module's manifest
	if err != nil {
		return oci.Explain("sign", ref, err)
	}
	res, err := sign.Sign(ctx, target, ref, subject, signer, opts)
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
	if res.Signer != nil {
		fmt.Fprintf(ios.Out, "  keyless, by %s\n", res.Signer)
	}
	return nil
}
