package oci

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Explain turns an error from talking to a registry into one that names the registry, the cause
// and the fix. op says what was being done ("push", "pull", ...). Errors it does not recognise are
// returned wrapped with op and the reference.
func Explain(op string, ref Ref, err error) error {
	if err == nil {
		return nil
	}
	var explained *explainedError
	var complete interface{ Complete() bool }
	if errors.As(err, &explained) || (errors.As(err, &complete) && complete.Complete()) {
		return err
	}
	host := ref.Registry
	var (
		resp      *errcode.ErrorResponse
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		dnsErr    *net.DNSError
	)
	msg := ""
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		msg = fmt.Sprintf("401 from %s: not logged in (run 'oprov login %s' or set up a docker credential helper)", host, host)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusUnauthorized:
		msg = fmt.Sprintf("401 from %s: not logged in, or the credentials were refused (run 'oprov login %s' or set up a docker credential helper)", host, host)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusForbidden:
		msg = fmt.Sprintf("403 from %s: the credentials have no %s permission on %s (ask the registry's owner, or log in as another user with 'oprov login %s')", host, op, ref.Repository, host)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusTooManyRequests:
		msg = fmt.Sprintf("429 from %s: rate limited even after retries (wait and try again)", host)
	case errors.As(err, &resp) && resp.StatusCode >= 500:
		msg = fmt.Sprintf("%d from %s after retries: the registry is failing (%s)", resp.StatusCode, host, strings.TrimSpace(resp.Error()))
	case errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound && hasCode(resp, errcode.ErrorCodeNameUnknown):
		msg = fmt.Sprintf("no repository %s on %s (check the path; 'oprov push' creates a repository)", ref.Repository, host)
	case errors.Is(err, http.ErrSchemeMismatch):
		msg = fmt.Sprintf("%s speaks plain HTTP, not HTTPS (pass --plain-http if that is intended)", host)
	case errors.As(err, &unknownCA):
		msg = fmt.Sprintf("the TLS certificate of %s is signed by an unknown authority (pass --ca-file CA.pem or set SSL_CERT_FILE; --plain-http for a registry without TLS)", host)
	case errors.As(err, &hostErr):
		msg = fmt.Sprintf("the TLS certificate of %s is not valid for that name: %v", host, hostErr)
	case errors.As(err, &dnsErr):
		msg = fmt.Sprintf("cannot resolve registry host %s: %v (check the reference)", ref.Host(), dnsErr.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = fmt.Sprintf("cannot reach %s: connection refused (is the registry running, and is the address right?)", host)
	case isTimeout(err):
		msg = fmt.Sprintf("cannot reach %s: timed out (check the address and the network)", host)
	case errors.Is(err, errdef.ErrNotFound) && ref.Reference != "":
		msg = fmt.Sprintf("%s not found in %s ('oprov inspect %s' lists the versions)", ref.Reference, ref.Repo(), ref.Repo())
	case errors.Is(err, errdef.ErrNotFound):
		msg = "repository not found (check the name; 'oprov push' creates it)"
	}
	if msg == "" {
		return fmt.Errorf("%s %s: %w", op, ref, err)
	}
	return &explainedError{msg: fmt.Sprintf("%s %s: %s", op, ref, msg), err: err}
}

// hasCode reports whether a registry's error answer carries the OCI error code.
func hasCode(resp *errcode.ErrorResponse, code string) bool {
	for _, e := range resp.Errors {
		if e.Code == code {
			return true
		}
	}
	return false
}

type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
