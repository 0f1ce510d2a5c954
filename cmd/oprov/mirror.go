package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/mirror"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/origin"
)

type mirrorOptions struct {
	io         *IOStreams
	Address    string
	Constraint string
	To         string
	Platforms  []string
	GPGKeys    []string
	registry   registryFlags
	output     outputFlag
}

func newMirrorCmd(ios *IOStreams) *cobra.Command {
	o := &mirrorOptions{io: ios}
	c := &cobra.Command{
		Use:   "mirror ADDRESS --version CONSTRAINT --to REPO",
		Short: "Copy a provider from its origin registry into an OCI repository",
		Long: `Read a provider from its origin registry (Provider Registry Protocol v1), check the OpenPGP
signature of each release's SHA256SUMS with the registry's signing keys (or the keys pinned with
--gpg-key) and each zip against SHA256SUMS, and push the versions that meet the constraint in
OpenTofu's OCI format. SHA256SUMS, its signature and the signing key are attached to each index
as a referrer, so the origin's provenance travels with it. Nothing is pushed for a version that
fails a check. Versions already mirrored with identical digests are skipped, and a run cut short
resumes where it stopped.`,
		Example: `  oprov mirror registry.opentofu.org/hashicorp/random --version '~> 3.6' --to mirror.internal/providers/hashicorp/random`,
		Args:    argsRange(1, 1, "one provider address: [HOST/]NAMESPACE/TYPE"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Address = args[0]
			return runMirror(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Constraint, "version", "", "version constraint, such as '~> 3.6' (default: every version)")
	c.Flags().StringVar(&o.To, "to", "", "destination repository, HOST[:PORT]/PATH or oci-layout:DIR (required)")
	c.Flags().StringSliceVar(&o.Platforms, "platform", nil, "platforms to mirror, OS_ARCH (repeatable; default all)")
	c.Flags().StringSliceVar(&o.GPGKeys, "gpg-key", nil, "armored OpenPGP public key file to pin as the only allowed signer (repeatable)")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runMirror(ctx context.Context, o *mirrorOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	addr, err := manifest.ParseProviderAddress(o.Address)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if o.To == "" {
		return usageErrorf("mirror: --to REPO is required")
	}
	to, err := parseRef(o.To)
	if err != nil {
		return err
	}
	if to.Reference != "" {
		return usageErrorf("mirror: --to names a repository; versions become its tags")
	}
	platforms, err := parsePlatforms(o.Platforms)
	if err != nil {
		return err
	}
	pinned, err := origin.ReadKeyFiles(o.GPGKeys)
	if err != nil {
		return err
	}
	t, err := o.io.Factory.registry(o.registry).Open(ctx, to, true)
	if err != nil {
		return oci.Explain("mirror", to, err)
	}
	bar := newProgress(o.io, "mirroring")
	res, err := mirror.Mirror(ctx, t, mirror.Options{
		Address: addr, Constraint: o.Constraint, Platforms: platforms, To: to, Registry: o.io.Factory.registry(o.registry),
		TrustedKeys: pinned, Progress: bar, Warn: func(msg string) { fmt.Fprintf(o.io.ErrOut, "oprov: warning: %s\n", msg) },
	})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("mirror %s: %w", addr, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Address  string            `json:"address"`
			To       string            `json:"to"`
			Versions []mirror.Mirrored `json:"versions"`
		}{addr.String(), to.String(), res})
	}
	for _, m := range res {
		state := fmt.Sprintf("uploaded %d", m.Uploaded)
		if m.Skipped {
			state = "already mirrored"
		}
		fmt.Fprintf(o.io.Out, "%s %s -> %s:%s (%s; %s; SHA256SUMS signed by %s)\n", addr, m.Version, to, m.Tag, plural(m.Platforms, "platform"), state, m.KeyID)
	}
	return nil
}
