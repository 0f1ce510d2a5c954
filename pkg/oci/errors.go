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
	msg, remedy := "", Remedy("")
	switch {
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		msg, remedy = fmt.Sprintf("401 from %s: not logged in", host), RemedyLogin
	case errors.As(err, &resp) && resp.StatusCode == http.StatusUnauthorized:
		msg, remedy = fmt.Sprintf("401 from %s: not logged in, or the credentials were refused", host), RemedyLogin
	case errors.As(err, &resp) && resp.StatusCode == http.StatusForbidden:
		msg, remedy = fmt.Sprintf("403 from %s: the credentials have no %s permission on %s", host, op, ref.Repository), RemedyPermission
	case errors.As(err, &resp) && resp.StatusCode == http.StatusTooManyRequests:
		msg = fmt.Sprintf("429 from %s: rate limited even after retries (wait and try again)", host)
	case errors.As(err, &resp) && resp.StatusCode >= 500:
		msg = fmt.Sprintf("%d from %s after retries: the registry is failing (%s)", resp.StatusCode, host, strings.TrimSpace(resp.Error()))
	case errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound && hasCode(resp, errcode.ErrorCodeNameUnknown):
		msg, remedy = fmt.Sprintf("no repository %s on %s (check the path)", ref.Repository, host), RemedyCreateRepository
	case errors.As(err, &resp) && plainHTTPToTLS(resp):
		msg, remedy = fmt.Sprintf("400 from %s to a plain-HTTP request: it speaks HTTPS", host), RemedyHTTPS
	case errors.Is(err, http.ErrSchemeMismatch):
		msg, remedy = fmt.Sprintf("%s speaks plain HTTP, not HTTPS", host), RemedyPlainHTTP
	case errors.As(err, &unknownCA):
		msg, remedy = fmt.Sprintf("the TLS certificate of %s is signed by an unknown authority", host), RemedyTrustCA
	case errors.As(err, &hostErr):
		msg = fmt.Sprintf("the TLS certificate of %s is not valid for that name: %v", host, hostErr)
	case errors.As(err, &dnsErr):
		msg = fmt.Sprintf("cannot resolve registry host %s: %v (check the reference)", ref.Host(), dnsErr.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = fmt.Sprintf("cannot reach %s: connection refused (is the registry running, and is the address right?)", host)
	case isTimeout(err):
		msg = fmt.Sprintf("cannot reach %s: timed out (check the address and the network)", host)
	case errors.Is(err, errdef.ErrNotFound) && ref.Reference != "":
		msg, remedy = fmt.Sprintf("%s not found in %s", ref.Reference, ref.Repo()), RemedyListVersions
	case errors.Is(err, errdef.ErrNotFound):
		msg, remedy = "repository not found (check the name)", RemedyCreateRepository
	}
	if msg == "" {
		return fmt.Errorf("%s %s: %w", op, ref, err)
	}
	return &explainedError{msg: fmt.Sprintf("%s %s: %s", op, ref, msg), err: err, remedy: remedy, ref: ref, op: op}
}

// Remedy names what a user can do about a registry's refusal; the program that reports the error
// words it (the CLI names its own commands and flags).
type Remedy string

// The remedies Explain finds.
const (
	RemedyLogin            Remedy = "log in"
	RemedyPermission       Remedy = "get permission"
	RemedyCreateRepository Remedy = "create the repository"
	RemedyListVersions     Remedy = "list the versions"
	RemedyPlainHTTP        Remedy = "use plain HTTP"
	RemedyHTTPS            Remedy = "use HTTPS"
	RemedyTrustCA          Remedy = "trust the CA"
)

// RemedyOf gives the remedy an explained error calls for, with the operation and reference it
// concerns, or "".
func RemedyOf(err error) (Remedy, string, Ref) {
	var e *explainedError
	if errors.As(err, &e) {
		return e.remedy, e.op, e.ref
	}
	return "", "", Ref{}
}

// WithRemedy marks err, from talking to host, as calling for remedy.
func WithRemedy(err error, remedy Remedy, host string) error {
	return &explainedError{msg: err.Error(), err: err, remedy: remedy, ref: Ref{Registry: host}}
}

// Unreachable reports whether err is a failure to reach a registry at all: a name that does not
// resolve, a connection refused, reset or timed out, or a TLS handshake that failed.
func Unreachable(err error) bool {
	var (
		dnsErr    *net.DNSError
		opErr     *net.OpError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		certErr   x509.CertificateInvalidError
	)
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || isTimeout(err) ||
		errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &certErr)
}

// plainHTTPToTLS reports whether a registry's answer is a TLS server's refusal of a plain-HTTP
// request: a 400 to an http:// URL with no OCI error code in it (Go's servers answer "Client sent
// an HTTP request to an HTTPS server", nginx "The plain HTTP request was sent to HTTPS port").
func plainHTTPToTLS(resp *errcode.ErrorResponse) bool {
	return resp.StatusCode == http.StatusBadRequest && resp.URL != nil && resp.URL.Scheme == "http" && len(resp.Errors) == 0
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
	msg    string
	err    error
	remedy Remedy
	op     string
	ref    Ref
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
