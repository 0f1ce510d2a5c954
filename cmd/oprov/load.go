package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/bundle"
	"github.com/oprov/oprov/pkg/ocicopy"
)

type loadOptions struct {
	io       *IOStreams
	File     string
	To       string
	Keys     []string
	Policy   string
	keyless  keylessFlags
	registry registryFlags
	output   outputFlag
}

func newLoadCmd(ios *IOStreams) *cobra.Command {
	o := &loadOptions{io: ios}
	c := &cobra.Command{
		Use:   "load FILE.tar --to HOST[/PREFIX]",
		Short: "Push a tarball written by 'oprov save' into a registry",
		Long: `Recreate each repository of a tarball below HOST[/PREFIX], with its referrers and cosign
signatures. Before anything is pushed, every blob is checked against its digest and, with
--policy or --key, every version's signature is verified: a damaged or unsigned tarball pushes
nothing.`,
		Example: `  oprov load providers.tar --to airgap.internal/mirror --policy oprov-policy.hcl
  oprov load providers.tar --to airgap.internal/mirror --key cosign.pub -o json`,
		Args: argsRange(1, 1, "one tarball"),
		RunE: func(c *cobra.Command, args []string) error {
			o.File = args[0]
			return runLoad(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.To, "to", "", "registry (and path prefix) to load into (required)")
	c.Flags().StringSliceVar(&o.Keys, "key", nil, "require signatures by this public key (repeatable)")
	c.Flags().StringVar(&o.Policy, "policy", "", "require signatures under this trust policy")
	o.keyless.register(c)
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runLoad(ctx context.Context, o *loadOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if o.To == "" {
		return usageErrorf("load: --to HOST[/PREFIX] is required")
	}
	policy, err := policyFromFlags(o.Keys, o.Policy, &o.keyless)
	if err != nil {
		return err
	}
	b, err := bundle.Open(ctx, o.File)
	if err != nil {
		return fmt.Errorf("load: %w (nothing was pushed)", err)
	}
	bar := newProgress(o.io, "loading")
	res, err := bundle.Load(ctx, b, bundle.LoadOptions{To: o.To, Registry: o.registry.options(), Policy: policy, Copy: ocicopy.Options{Progress: bar}, Log: o.io.ErrOut})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("load %s: %w", o.File, err)
	}
	// A configuration bundle's providers sit below --to under one template: say how tofu (and
	// oprov) install them from there.
	tofurc, oprovHCL := "", ""
	if b.Listing != nil {
		var notes []string
		tofurc, notes = loader.MergePrinted(b.Listing.TofuCLIConfig(o.To), loader.UserCLIFiles("tofu", ""))
		for _, n := range notes {
			fmt.Fprintln(o.io.ErrOut, "Note: "+n)
		}
		oprovHCL = b.Listing.OprovHCL(o.To, o.Policy)
	}
	if o.output.JSON() {
		if b.Listing == nil {
			return writeJSON(o.io.Out, res)
		}
		return writeJSON(o.io.Out, struct {
			Loaded   []bundle.Loaded `json:"loaded"`
			TofuRC   string          `json:"tofurc"`
			OprovHCL string          `json:"oprov_hcl"`
		}{res, tofurc, oprovHCL})
	}
	for _, l := range res {
		fmt.Fprintf(o.io.Out, "Loaded %s into %s: %d uploaded, %d already there\n", strings.Join(l.Result.Tags, ", "), l.Repository, l.Result.Uploaded, l.Result.Skipped)
	}
	fmt.Fprintln(o.io.Out, loadChecks(o))
	if b.Listing != nil {
		fmt.Fprintf(o.io.Out, "\nOpenTofu >= 1.10 installs them from there with this CLI configuration:\n\n%s\nand oprov (oprov.hcl):\n\n%s", tofurc, oprovHCL)
	}
	return nil
}

// loadChecks says what load checked before it pushed anything.
func loadChecks(o *loadOptions) string {
	const digests = "Checked: every blob against its digest"
	switch {
	case o.Policy != "":
		return fmt.Sprintf("%s, and every version's signature under the policy %s (in warn mode, the warnings above name what was not verified).", digests, o.Policy)
	case len(o.Keys) > 0 || len(o.keyless.identities()) > 0:
		by := append([]string{}, o.Keys...)
		for _, id := range o.keyless.identities() {
			by = append(by, "the keyless identity "+id.String())
		}
		return fmt.Sprintf("%s, and every version's signature, by one of %s.", digests, strings.Join(by, ", "))
	}
	return digests + ". Not checked: signatures (give --policy FILE or --key KEY.pub to require them)."
}
