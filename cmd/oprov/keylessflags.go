package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/sign"
)

// keylessFlags are the flags that trust a keyless signer, as cosign verify names them: the
// certificate's identity and OIDC issuer (each exact or a regular expression), the GitHub
// workflow claims, and the trusted root to check certificates against, offline. Every command
// that verifies takes them beside --key and --policy.
type keylessFlags struct {
	TrustedRoot    string
	Identity       string
	IdentityRegexp string
	Issuer         string
	IssuerRegexp   string
	Repository     string
	Ref            string
	Trigger        string
}

func (k *keylessFlags) register(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&k.TrustedRoot, "trusted-root", "", "sigstore trusted root (trusted_root.json, as 'oprov trusted-root' writes it) that keyless signatures are checked against, offline")
	f.StringVar(&k.Identity, "certificate-identity", "", "trust keyless signatures by this identity (the certificate's subject alternative name)")
	f.StringVar(&k.IdentityRegexp, "certificate-identity-regexp", "", "trust keyless signatures by an identity matching this regular expression")
	f.StringVar(&k.Issuer, "certificate-oidc-issuer", "", "the OIDC issuer the trusted identity's certificate must name")
	f.StringVar(&k.IssuerRegexp, "certificate-oidc-issuer-regexp", "", "a regular expression the certificate's OIDC issuer must match")
	f.StringVar(&k.Repository, "certificate-github-workflow-repository", "", "the GitHub repository the signing workflow ran in (owner/name)")
	f.StringVar(&k.Ref, "certificate-github-workflow-ref", "", "the git ref the signing workflow ran for (refs/tags/v1.0.0)")
	f.StringVar(&k.Trigger, "certificate-github-workflow-trigger", "", "the event that triggered the signing workflow (push)")
}

// identities is the identity the flags name, or none.
func (k *keylessFlags) identities() []sign.Identity {
	id := sign.Identity{Issuer: k.Issuer, IssuerRegexp: k.IssuerRegexp, Subject: k.Identity, SubjectRegexp: k.IdentityRegexp,
		Repository: k.Repository, Ref: k.Ref, Trigger: k.Trigger}
	if id.IsZero() {
		return nil
	}
	return []sign.Identity{id}
}

// policyFromFlags makes a policy from --key and the keyless flags (enforce these), or --policy,
// or nil for none, through sign.NewPolicy.
func policyFromFlags(keys []string, policyFile string, k *keylessFlags) (*sign.Policy, error) {
	from := sign.PolicyFrom{Keys: keys, File: policyFile, Rule: "--key", KeysName: "--key"}
	if k != nil {
		from.Identities, from.TrustedRoot = k.identities(), k.TrustedRoot
		if len(keys) == 0 && len(from.Identities) > 0 {
			from.Rule = "--certificate-identity"
		}
	}
	p, err := sign.NewPolicy(from)
	switch {
	case errors.Is(err, sign.ErrKeysAndPolicy):
		return nil, usageErrorf("give --key or --policy, not both (keyless identities count as keys: --certificate-identity goes without --policy too)")
	case errors.Is(err, sign.ErrNoTrustedRoot):
		return nil, usageErrorf("%v", err)
	case err != nil && k != nil && len(k.identities()) > 0 && policyFile == "":
		return nil, usageErrorf("%v", err)
	case errors.Is(err, fs.ErrNotExist):
		// A --key, --policy or --trusted-root that names no file: the argument is wrong.
		return nil, usageErrorf("%v (check the file's name)", err)
	}
	return p, err
}

// signingConfigEnv names a signing configuration (as --signing-config) for every keyless
// signature: how a CI points oprov at a private Sigstore instance once, for sign and push --sign.
const signingConfigEnv = "OPROV_SIGNING_CONFIG"

// keylessSignFlags are the flags of a keyless signature, as cosign sign names them: all optional.
// The token defaults to the CI's ambient identity, the services to the signing configuration
// (--signing-config, else OPROV_SIGNING_CONFIG), else the public-good Sigstore instance.
type keylessSignFlags struct {
	IDToken       string
	FulcioURL     string
	TSAURLs       []string
	RekorURL      string
	RekorVersion  uint32
	SigningConfig string
	TrustedRoot   string
}

func (k *keylessSignFlags) register(c *cobra.Command, prefix string) {
	f := c.Flags()
	f.StringVar(&k.IDToken, "identity-token", "", prefix+"the OIDC identity token (default $"+sign.IDTokenEnv+", or GitHub Actions' own)")
	f.StringVar(&k.FulcioURL, "fulcio-url", "", prefix+"the Fulcio that certifies the identity (default: the public-good instance's)")
	f.StringSliceVar(&k.TSAURLs, "timestamp-server-url", nil, prefix+"RFC 3161 timestamp authority URL (repeatable)")
	f.StringVar(&k.RekorURL, "rekor-url", "", prefix+"also record the signature in this transparency log")
	f.Uint32Var(&k.RekorVersion, "rekor-version", 1, prefix+"the --rekor-url log's API major version (1, or 2 for rekor-tiles)")
	f.StringVar(&k.SigningConfig, "signing-config", "", prefix+"sigstore signing config (the Fulcio and TSA URLs), as cosign v3 reads (default $"+signingConfigEnv+")")
	f.StringVar(&k.TrustedRoot, "trusted-root", "", prefix+"check the signature against this trusted root before storing it")
}

// set reports whether any keyless flag was given.
func (k *keylessSignFlags) set() bool {
	return k.IDToken != "" || k.FulcioURL != "" || len(k.TSAURLs) > 0 || k.RekorURL != "" || k.SigningConfig != "" || k.TrustedRoot != ""
}

// keyless completes the flags into how to sign (sign.KeylessFrom), for command cmd.
func (k *keylessSignFlags) keyless(ctx context.Context, cmd string) (*sign.Keyless, error) {
	opts := sign.Keyless{IDToken: k.IDToken, FulcioURL: k.FulcioURL, TSAURLs: k.TSAURLs, RekorURL: k.RekorURL, RekorVersion: k.RekorVersion}
	if k.TrustedRoot != "" {
		tr, err := sign.LoadTrustedRoot(k.TrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		opts.TrustedRoot = tr
	}
	sc := k.SigningConfig
	if sc == "" && k.FulcioURL == "" && len(k.TSAURLs) == 0 && k.RekorURL == "" {
		sc = os.Getenv(signingConfigEnv)
	}
	out, err := sign.KeylessFrom(ctx, opts, sc)
	if err != nil {
		return nil, usageErrorf("%s: %v", cmd, err)
	}
	return out, nil
}
