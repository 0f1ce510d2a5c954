package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/artifactcopy"
	"github.com/oprov/oprov/pkg/bundle"
	"github.com/oprov/oprov/pkg/sign"
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
signatures, all or nothing. The tarball is untrusted input: its entries (regular files only, each
within its bound) and names (valid OCI repository paths and tags, none leaving --to) are checked
before it is read, and a configuration bundle's listing against what it holds. Before anything
is pushed, every blob, referrer and .sig manifest is checked against its digest and, with
--policy or --key, every version's signature is verified: a damaged or unsigned tarball pushes
nothing. Tags are written last, each .sig tag before its version's.

Origin providers (from 'save --config') are verified by their origin's OpenPGP-signed
SHA256SUMS under a --policy rule that names the key's fingerprint in origin_keys. For a
configuration bundle, the printed CLI configuration and oprov.hcl cover only the providers it
holds whose signatures were verified, and carry the --policy or --key used.`,
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
	b, err := bundle.Open(ctx, o.File, o.io.Factory.Limits)
	if err != nil {
		return fmt.Errorf("load: %w (nothing was pushed)", err)
	}
	bar := newProgress(o.io, "loading")
	rep, err := bundle.Load(ctx, b, bundle.LoadOptions{To: o.To, Registry: o.io.Factory.registry(o.registry), Policy: policy, Copy: artifactcopy.Options{Progress: bar, Limits: o.io.Factory.Limits}, Log: o.io.ErrOut})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("load %s: %w", o.File, err)
	}
	res := rep.Loaded
	// A configuration bundle's providers sit below --to under one template: say how tofu (and
	// oprov) install them from there. Only what load proved is printed: providers the bundle
	// holds (or a delta's base holds where it was loaded), checked, and verified when asked.
	tofurc, oprovHCL := "", ""
	for _, n := range rep.Left {
		fmt.Fprintln(o.io.ErrOut, "Note: not in the printed configuration: "+n)
	}
	if p := rep.Printable; p != nil && len(p.Providers) > 0 {
		var notes []string
		tofurc, notes = loader.MergePrinted(p.TofuCLIConfig(o.To), loader.UserCLIFiles("tofu", ""))
		for _, n := range notes {
			fmt.Fprintln(o.io.ErrOut, "Note: "+n)
		}
		trust, err := printedTrust(o)
		if err != nil {
			return err
		}
		oprovHCL = p.OprovHCL(o.To, trust)
	}
	if o.output.JSON() {
		if b.Listing == nil {
			return writeJSON(o.io.Out, res)
		}
		return writeJSON(o.io.Out, struct {
			Loaded   []bundle.Loaded `json:"loaded"`
			TofuRC   string          `json:"tofurc"`
			OprovHCL string          `json:"oprov_hcl"`
			Left     []string        `json:"left_out,omitempty"`
			loadedModules
		}{res, tofurc, oprovHCL, rep.Left, modulesLoaded(rep, o.To)})
	}
	for _, l := range res {
		fmt.Fprintf(o.io.Out, "Loaded %s into %s: %d uploaded, %d already there\n", strings.Join(l.Result.Tags, ", "), l.Repository, l.Result.Uploaded, l.Result.Skipped)
	}
	fmt.Fprintln(o.io.Out, loadChecks(o))
	if oprovHCL != "" {
		fmt.Fprintf(o.io.Out, "\nOpenTofu >= 1.10 installs them from there with this CLI configuration:\n\n%s\nand oprov (oprov.hcl):\n\n%s", tofurc, oprovHCL)
	}
	printLoadedModules(o, modulesLoaded(rep, o.To))
	return nil
}

// printedTrust is what the printed oprov.hcl verifies with: what load verified with, paths made
// absolute.
func printedTrust(o *loadOptions) (bundle.PrintedTrust, error) {
	abs := func(p string) (string, error) {
		if p == "" || strings.HasPrefix(strings.TrimSpace(p), "-----BEGIN") {
			return p, nil
		}
		return filepath.Abs(p)
	}
	var t bundle.PrintedTrust
	var err error
	if t.Policy, err = abs(o.Policy); err != nil {
		return t, err
	}
	for _, k := range o.Keys {
		a, err := abs(k)
		if err != nil {
			return t, err
		}
		t.PublicKeys = append(t.PublicKeys, a)
	}
	for _, id := range o.keyless.identities() {
		t.Identities = append(t.Identities, sign.IdentityBlock{Issuer: id.Issuer, IssuerRegexp: id.IssuerRegexp, Subject: id.Subject,
			SubjectRegexp: id.SubjectRegexp, Repository: id.Repository, Ref: id.Ref, Trigger: id.Trigger})
	}
	if len(t.Identities) > 0 {
		if t.TrustedRoot, err = abs(o.keyless.TrustedRoot); err != nil {
			return t, err
		}
	}
	return t, nil
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
