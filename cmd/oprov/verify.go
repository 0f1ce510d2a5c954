package main

import (
	"context"
	"errors"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/spf13/cobra"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

type verifyOptions struct {
	io        *IOStreams
	Ref       string
	Keys      []string
	Policy    string
	keyless   keylessFlags
	Address   string
	Platforms []string
	Kind      string
	AllZips   bool
	NoZips    bool
	registry  registryFlags
	output    outputFlag
}

func newVerifyCmd(ios *IOStreams) *cobra.Command {
	o := &verifyOptions{io: ios}
	c := &cobra.Command{
		Use:   "verify REPO:VERSION (--key PUB... | --certificate-identity ID --certificate-oidc-issuer URL --trusted-root FILE | --policy FILE)",
		Short: "Verify a provider version's, a module's or an image's signature and digests",
		Long: `Verify that a provider version is signed by a trusted key, in any of cosign's storage
forms (bundle referrer, sha256-<hex>.sig tag, or simple-signing referrer as cosign's
--registry-referrers-mode=oci-1-1 writes it), including signatures made by the cosign CLI.

A signature counts only if it is by a trusted key and its signed payload names the exact index
digest the tag resolves to now. The index must be the version the tag says. Every platform's
manifest is fetched and checked against its digest. That is the signature check: it reads a few
small documents and proves which zips (by digest) the signer vouched for.

The zip check is a separate step: the zips are fetched and hashed against those digests, this
machine's platform by default, those named with --platform, or all with --all-platforms; it costs
the zips' size. --no-zips skips it (installers hash every zip they fetch anyway).

A keyless signature (a short-lived Fulcio certificate, as cosign signs from CI) counts when its
certificate chains to a certificate authority of --trusted-root, its time is proven by an RFC 3161
timestamp or a transparency-log entry of that root and lies inside the certificate's validity,
and its identity matches --certificate-identity(-regexp), --certificate-oidc-issuer(-regexp) and
any --certificate-github-workflow-* claims given. Nothing is fetched but from the registry.

With --policy, the trust policy picks the keys for this repository (or --address provider) and
its mode: enforce fails, warn reports and exits 0.

A module package (OpenTofu's modulepkg) is verified the same way, its manifest digest in place of
the index's, under the same keys, identities or policy (rules match it by repository); its zip is
then fetched and checked against its digest unless --no-zips.

Any other image or artifact (such as oprov's own serve image) is verified as 'cosign verify'
does: a signature by a trusted key or identity over the digest the reference resolves to. An
index's manifests are then checked against their digests. Nothing else is checked: the output
says it is not a provider or module.`,
		Example: `  oprov verify registry.example.com/providers/acme/hello:1.0.0 --key cosign.pub
  oprov verify registry.example.com/providers/acme/hello:1.0.0 --policy oprov-policy.hcl
  oprov verify registry.example.com/providers/acme/hello:1.0.0 --trusted-root trusted_root.json \
    --certificate-oidc-issuer https://token.actions.githubusercontent.com \
    --certificate-identity-regexp '^https://github.com/acme/providers/\.github/workflows/release\.yml@refs/tags/v'`,
		Args: argsRange(1, 1, "one reference: REPO:VERSION"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Ref = args[0]
			return runVerify(c.Context(), o)
		},
	}
	c.Flags().StringSliceVar(&o.Keys, "key", nil, "trusted public key file (repeatable)")
	c.Flags().StringVar(&o.Policy, "policy", "", "trust policy file (HCL)")
	o.keyless.register(c)
	c.Flags().StringVar(&o.Address, "address", "", "the provider's source address, for policy rules that match providers")
	c.Flags().StringSliceVar(&o.Platforms, "platform", nil, "fetch and check these platforms' zips (default: this machine's platform)")
	c.Flags().StringVar(&o.Kind, "kind", "", "refuse anything but this kind of artifact: provider, module or image (default: any; a script that installs what it verified should name it)")
	c.Flags().BoolVar(&o.AllZips, "all-platforms", false, "fetch and check every platform's zip")
	c.Flags().BoolVar(&o.NoZips, "no-zips", false, "check the signature and every platform's manifest only; fetch no zip")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runVerify(ctx context.Context, o *verifyOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if (len(o.Keys) == 0 && len(o.keyless.identities()) == 0) == (o.Policy == "") {
		return usageErrorf("verify: give --key PUB (one or more) or --policy FILE, or a keyless identity: --certificate-identity with --certificate-oidc-issuer and --trusted-root")
	}
	switch o.Kind {
	case "", "provider", "module", "image":
	default:
		return usageErrorf("verify: --kind %q: give provider, module or image", o.Kind)
	}
	ref, err := parseVersionRef("verify", o.Ref)
	if err != nil {
		return err
	}
	platforms, err := parsePlatforms(o.Platforms)
	if err != nil {
		return err
	}
	if o.NoZips && (o.AllZips || len(platforms) > 0) {
		return usageErrorf("verify: --no-zips fetches no zip: drop --platform and --all-platforms, or --no-zips")
	}
	opts := sign.VerifyOptions{Limits: o.io.Factory.Limits, Zips: platforms, AllZips: o.AllZips, HostZip: len(platforms) == 0 && !o.AllZips && !o.NoZips}
	policy, err := policyFromFlags(o.Keys, o.Policy, &o.keyless)
	if err != nil {
		return err
	}
	if o.Policy == "" {
		// Keys and identities given as flags: one rule, applied as such (no policy wording).
		r := policy.Rules[0]
		opts.Keys, opts.Identities, opts.TrustedRoot, policy = r.Keys, r.Identities, r.TrustedRoot, nil
	}
	addr := ""
	if o.Address != "" {
		a, err := manifest.ParseProviderAddress(o.Address)
		if err != nil {
			return usageErrorf("--address: %v", err)
		}
		addr = a.String()
	}
	target, err := o.io.Factory.registry(o.registry).Open(ctx, ref, false)
	if err != nil {
		return o.refused(oci.Explain("verify", ref, err))
	}
	opts.NoZips, opts.Kind = o.NoZips, sign.Kind(o.Kind)
	bar := newProgress(o.io, "verifying")
	opts.Progress = bar
	v, err := sign.VerifyReference(ctx, target, ref, policy, addr, opts)
	bar.Finish()
	var misfit *sign.OptionsError
	var other *sign.KindError
	switch {
	case errors.As(err, &misfit):
		return usageErrorf("%s", misfit)
	case errors.As(err, &other):
		return o.refused(&exitCodeError{code: exitRefused, msg: other.Error()})
	}
	if err != nil {
		return o.refused(oci.Explain("verify", ref, err))
	}
	if v.Warning != nil {
		fmt.Fprintf(o.io.ErrOut, "oprov: warning (policy mode warn): %v\n", v.Warning)
	}
	return printVerified(o, v)
}

// refused answers a failed verification: with -o json, {"verified": false, ...} on stdout with
// the reason and the exit code, so that a script reads one document whatever happened.
func (o *verifyOptions) refused(err error) error {
	if !o.output.JSON() {
		return err
	}
	reason := err.Error()
	var se *sign.Error
	if errors.As(err, &se) {
		reason = se.Reason
	}
	writeJSON(o.io.Out, struct {
		Verified  bool   `json:"verified"`
		Reference string `json:"reference"`
		Reason    string `json:"reason"`
		Unsigned  bool   `json:"unsigned,omitempty"`
		ExitCode  int    `json:"exit_code"`
	}{false, o.Ref, reason, se != nil && se.Unsigned, exitCode(err)})
	return &answeredError{err}
}

// imageJSON is the image verify checked, in its JSON output.
type imageJSON struct {
	Reference string          `json:"reference"`
	Digest    string          `json:"digest"`
	MediaType string          `json:"media_type"`
	Manifests []imageManifest `json:"manifests,omitempty"`
}

type imageManifest = sign.ImageManifest

// imageNote says what verify checked of an image, and what it did not.
const imageNote = "not an OpenTofu provider or module: only its signatures and manifests were checked"

// verifyJSON is verify's one document of a verification, a provider's, a module's or an image's:
// what one kind has no part in is left out. (A refusal is refused's document.)
type verifyJSON struct {
	Verified   bool             `json:"verified"`
	Kind       string           `json:"kind,omitempty"` // a module's or an image's
	Checked    string           `json:"checked,omitempty"`
	Rule       string           `json:"rule,omitempty"`
	Mode       string           `json:"mode"`
	Warning    string           `json:"warning,omitempty"`
	Result     *sign.Result     `json:"result,omitempty"` // a provider's
	Module     *moduleJSON      `json:"module,omitempty"`
	ZipChecked *bool            `json:"zip_checked,omitempty"` // a module's
	Image      *imageJSON       `json:"image,omitempty"`
	Signatures []sign.Signature `json:"signatures,omitempty"` // a module's or an image's (a provider's are in its result)
}

// verifiedJSON gives the JSON document of a verification.
func verifiedJSON(v *sign.Verification) verifyJSON {
	out := verifyJSON{Verified: v.Warning == nil, Rule: v.Rule, Mode: v.Mode}
	if v.Warning != nil {
		out.Warning = v.Warning.Error()
	}
	if v.Kind == sign.KindProvider {
		out.Result = v.Result
		return out
	}
	out.Kind = string(v.Kind)
	if v.Result != nil {
		out.Signatures = v.Result.Signatures
	}
	switch v.Kind {
	case sign.KindModule:
		m := moduleOf(v)
		out.Module, out.ZipChecked = &m, &v.Zip.Fetched
	case sign.KindImage:
		out.Checked = imageNote
		out.Image = &imageJSON{Reference: v.Reference, Digest: v.Digest.String(), MediaType: v.MediaType, Manifests: v.Manifests}
	}
	return out
}

// moduleOf describes a verified module package: its digests and size, and, when its zip was
// fetched and checked, its hashes, version and annotations.
func moduleOf(v *sign.Verification) moduleJSON {
	out := moduleJSON{Reference: v.Reference, Manifest: v.Digest.String(), Zip: v.Zip.Desc.Digest.String(), Size: v.Zip.Desc.Size}
	if v.Zip.Fetched {
		out.H1, out.ZH, out.Annotations, out.Tag = v.Zip.H1, v.Zip.ZH, v.Annotations, v.Tag
		out.Version = v.Annotations[ocispec.AnnotationVersion]
	}
	return out
}

// printVerified prints a verification: its JSON document, or what was verified, by whom and
// under which rule, and what was checked below the signed digest.
func printVerified(o *verifyOptions, v *sign.Verification) error {
	if o.output.JSON() {
		return writeJSON(o.io.Out, verifiedJSON(v))
	}
	if v.Result == nil {
		return nil
	}
	w := o.io.Out
	switch v.Kind {
	case sign.KindModule:
		fmt.Fprintf(w, "Verified module %s (%s)\n", v.Reference, v.Digest)
	case sign.KindImage:
		fmt.Fprintf(w, "Verified image %s (%s)\n  %s\n", v.Reference, v.Digest, imageNote)
	default:
		fmt.Fprintf(w, "Verified %s (%s)\n", v.Reference, v.Digest)
	}
	if v.Rule != "" {
		fmt.Fprintf(w, "  trusted by rule %q of %s (mode %s)\n", v.Rule, o.Policy, v.Mode)
	}
	for _, sig := range v.Result.Signatures {
		switch {
		case v.Kind != sign.KindProvider:
			fmt.Fprintf(w, "  signature %s (%s) by %s\n", sig.Manifest, sig.Form, sig.By())
		case sig.Signer != nil:
			fmt.Fprintf(w, "  signature %s (%s) by %s, keyless\n", sig.Manifest, sig.Form, sig.Signer)
			for _, t := range sig.Time {
				fmt.Fprintf(w, "    signing time proven by %s\n", t)
			}
		default:
			fmt.Fprintf(w, "  signature %s (%s) by %s\n", sig.Manifest, sig.Form, sig.Key)
		}
	}
	for _, p := range v.Result.Platforms {
		what := "manifest checked"
		if p.Fetched {
			what = "manifest and zip checked"
		}
		fmt.Fprintf(w, "  %-14s %s\n", p.Platform, what)
	}
	if v.Zip != nil && v.Zip.Fetched {
		fmt.Fprintf(w, "  zip %s checked (%s)\n  %s\n", v.Zip.Desc.Digest, humanBytes(v.Zip.Desc.Size), v.Zip.H1)
	}
	for _, m := range v.Manifests {
		fmt.Fprintf(w, "  %-14s manifest %s checked\n", m.Platform, m.Digest)
	}
	return nil
}
