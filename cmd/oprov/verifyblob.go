package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/sign"
)

type verifyBlobOptions struct {
	io      *IOStreams
	File    string
	Bundle  string
	Keys    []string
	keyless keylessFlags
	output  outputFlag
}

func newVerifyBlobCmd(ios *IOStreams) *cobra.Command {
	o := &verifyBlobOptions{io: ios}
	c := &cobra.Command{
		Use:   "verify-blob FILE --bundle FILE.bundle (--key PUB... | --certificate-identity ID --certificate-oidc-issuer URL --trusted-root FILE)",
		Short: "Verify a file's signature, as cosign verify-blob does (an oprov release's SHA256SUMS)",
		Long: `Verify that a file is signed by a trusted key or keyless identity, from the bundle that
'cosign sign-blob --new-bundle-format --bundle FILE.bundle' writes (cosign v3 writes that format
by default). This is how an installed oprov checks the next oprov release: verify its SHA256SUMS,
then check the archive against it with sha256sum -c.

The file is read once, as a stream. The signature counts only if it is over this file's digest
and is by one of the --key keys, or by a certificate that chains to a certificate authority of
--trusted-root, whose use an RFC 3161 timestamp or a transparency-log entry of that root proves,
and whose identity matches --certificate-identity(-regexp), --certificate-oidc-issuer(-regexp) and
any --certificate-github-workflow-* claims given. Nothing is fetched: the check is offline.

With --key, the keys alone decide: the key hint a bundle carries is ignored, and a
transparency-log entry is not required.

cosign's old bundle format (base64Signature, cert, rekorBundle) and attestation bundles are
refused, saying so. Exit codes: 0 verified; 10 refused (another key or identity, or the file
does not match the bundle); 12 the bundle holds no signature; 2 a missing file, anything but a
regular file (a directory, a named pipe, a device) or a bad flag; 1 a file that cannot be read.`,
		Example: `  oprov verify-blob SHA256SUMS --bundle SHA256SUMS.bundle --key cosign.pub
  oprov verify-blob SHA256SUMS --bundle SHA256SUMS.sigstore.json --trusted-root trusted_root.json \
    --certificate-oidc-issuer https://token.actions.githubusercontent.com \
    --certificate-github-workflow-repository oprov/oprov \
    --certificate-identity-regexp '^https://github\.com/oprov/oprov/\.github/workflows/release\.yml@refs/tags/v[0-9][^@]*$'`,
		Args: argsRange(1, 1, "one file: the file the bundle signs"),
		RunE: func(c *cobra.Command, args []string) error {
			o.File = args[0]
			return runVerifyBlob(o)
		},
	}
	c.Flags().StringVar(&o.Bundle, "bundle", "", "the signature bundle (cosign sign-blob --new-bundle-format --bundle)")
	c.Flags().StringSliceVar(&o.Keys, "key", nil, "trusted public key file (repeatable)")
	o.keyless.register(c)
	o.output.register(c)
	return c
}

func runVerifyBlob(o *verifyBlobOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if o.Bundle == "" {
		return usageErrorf("verify-blob: give --bundle FILE.bundle, the bundle 'cosign sign-blob --new-bundle-format --bundle' wrote")
	}
	if len(o.Keys) == 0 && len(o.keyless.identities()) == 0 {
		return usageErrorf("verify-blob: give --key PUB (one or more), or a keyless identity: --certificate-identity with --certificate-oidc-issuer and --trusted-root")
	}
	policy, err := policyFromFlags(o.Keys, "", &o.keyless)
	if err != nil {
		return o.refused(fileError(err))
	}
	r := policy.Rules[0]
	data, err := sign.ReadBlobBundle(o.Bundle)
	if err != nil {
		return o.refused(fileError(err))
	}
	res, err := sign.VerifyBlob(o.File, o.Bundle, data, sign.BlobOptions{Keys: r.Keys, Identities: r.Identities, TrustedRoot: r.TrustedRoot})
	if err != nil {
		return o.refused(fileError(err))
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Verified bool `json:"verified"`
			*sign.BlobResult
		}{true, res})
	}
	fmt.Fprintf(o.io.Out, "Verified %s (%s)\n", res.File, res.Digest)
	if res.Signer != nil {
		fmt.Fprintf(o.io.Out, "  signed keylessly by %s\n", res.Signer)
		for _, t := range res.Time {
			fmt.Fprintf(o.io.Out, "    signing time proven by %s\n", t)
		}
		if res.Logged {
			fmt.Fprintf(o.io.Out, "    transparency-log entry checked against %s\n", o.keyless.TrustedRoot)
		}
	} else {
		fmt.Fprintf(o.io.Out, "  signed by %s\n", res.Key)
	}
	return nil
}

// fileError makes a file that does not exist (the blob, the bundle, a key) or a directory given
// as a file a usage error: the argument is wrong. Other read failures (permissions, I/O) stay
// plain errors (exit 1).
func fileError(err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist) && errors.As(err, &pe):
		return usageErrorf("verify-blob: no such file %s (%v)", pe.Path, err)
	case errors.Is(err, fs.ErrInvalid):
		return usageErrorf("verify-blob: %v", err)
	}
	return err
}

// refused answers a failed check; with -o json, {"verified": false, ...} on stdout too.
func (o *verifyBlobOptions) refused(err error) error {
	if !o.output.JSON() {
		return err
	}
	reason := err.Error()
	var be *sign.BlobError
	if errors.As(err, &be) {
		reason = be.Reason
	}
	writeJSON(o.io.Out, struct {
		Verified bool   `json:"verified"`
		File     string `json:"file"`
		Reason   string `json:"reason"`
		Unsigned bool   `json:"unsigned,omitempty"`
		ExitCode int    `json:"exit_code"`
	}{false, o.File, reason, be != nil && be.Unsigned, exitCode(err)})
	return &answeredError{err}
}
