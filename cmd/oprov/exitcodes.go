package main

import (
	"errors"
	"net/http"

	"github.com/spf13/cobra"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// exitCode classes a failure so that a script can act on it: refused (verification or policy),
// could not check (network, TLS, registry failing, credentials), not found, or usage. What it
// does not recognise is 1.
func exitCode(err error) int {
	var ue *usageError
	var se *sign.Error
	var be *sign.BlobError
	var ce *exitCodeError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &se) && se.Unsigned, errors.As(err, &be) && be.Unsigned:
		return exitUnsigned
	case errors.As(err, &se), errors.As(err, &be), errors.Is(err, loader.ErrLockMismatch):
		return exitRefused
	}
	switch remedy, _, _ := oci.RemedyOf(err); remedy {
	case oci.RemedyLogin, oci.RemedyPermission:
		return exitAuth
	case oci.RemedyListVersions, oci.RemedyCreateRepository:
		return exitNotFound
	case oci.RemedyPlainHTTP, oci.RemedyHTTPS, oci.RemedyTrustCA:
		return exitUnreachable
	}
	var resp *errcode.ErrorResponse
	switch {
	case errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
		return exitAuth
	case errors.As(err, &resp) && (resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests):
		return exitUnreachable
	case oci.Unreachable(err):
		return exitUnreachable
	}
	return exitError
}

// exitCodesHelp is 'oprov help exit-codes'.
const exitCodesHelp = `Exit codes

oprov exits with one of these codes, so that a script can tell a refusal from a failure to check:

    0    success
    1    any other failure
    2    usage: an unknown command or flag, or a bad argument
    3    could not check: the registry was unreachable, its TLS failed, or it kept failing (5xx, 429)
    4    could not check: the registry wants credentials, or refused them (401, 403)
    10   refused: no signature by a trusted signer, a policy refused the version, or it does not match the lock file
    11   not found: no such version or repository
    12   refused: the version is not signed at all
    130  interrupted (SIGINT)

'oprov run' and 'oprov init' end with the code of the command they run (tofu, terraform or
another), unchanged. Their own failures use codes tofu and terraform never do, as docker run,
env, timeout and chroot do, so that 'oprov run --replay FILE -- tofu plan -detailed-exitcode'
exits 2 only when the plan has changes:

    125  oprov failed: a bad flag or argument, a refused or unreachable provider, anything else
    126  the command was found but cannot be run (not executable, a directory)
    127  the command was not found

The numbers follow tools a script may already handle: cosign verify uses 10 (no matching
signature), 11 (no such tag) and 12 (no signature); gh uses 4 when authentication is needed.
Codes 3 and 4 mean "try again, or fix the access"; 10 and 12 mean "do not use this version".
'oprov verify-blob' exits 10 when the file does not match its bundle or another signer made it,
and 12 when the bundle holds no signature. 'oprov trusted-root' exits 10 when TUF refuses what the
repository served, and 3 when it gets no answer.

With -o json, a command that fails still prints a JSON object on stdout where it can say why:
'oprov verify -o json' prints {"verified": false, "reason": "...", "exit_code": N}.`

// newExitCodesTopic is the help topic 'oprov help exit-codes': a command with nothing to run,
// which cobra lists under "Additional help topics".
func newExitCodesTopic() *cobra.Command {
	return &cobra.Command{
		Use:     "exit-codes",
		Short:   "What oprov's exit codes mean",
		Long:    exitCodesHelp,
		Example: "  oprov help exit-codes",
	}
}
