package main

import (
	"github.com/oprov/oprov/pkg/oci"
)

// advice words what the user can do about an error, in the CLI's own terms (its commands, flags
// and variables), or gives "". The library packages say what went wrong and which remedy it
// calls for; only the CLI knows how a user applies it.
func advice(err error) string {
	if a := limitAdvice(err); a != "" {
		return a
	}
	remedy, op, ref := oci.RemedyOf(err)
	host := ref.Registry
	switch remedy {
	case oci.RemedyLogin:
		return "run 'oprov login " + host + "' (or set up a docker credential helper), or pass --registry-config with a credentials file"
	case oci.RemedyPermission:
		return "ask the registry's owner for " + op + " permission on " + ref.Repository + ", or log in as another user with 'oprov login " + host + "'"
	case oci.RemedyCreateRepository:
		return "'oprov push' creates a repository"
	case oci.RemedyListVersions:
		return "'oprov inspect " + ref.Repo() + "' lists the versions"
	case oci.RemedyPlainHTTP:
		return "pass --plain-http if plain HTTP to " + host + " is intended"
	case oci.RemedyHTTPS:
		return "drop --plain-http: " + host + " speaks HTTPS (add --ca-file CA.pem if its certificate is not trusted)"
	case oci.RemedyTrustCA:
		return "trust " + host + "'s CA with --ca-file CA.pem or SSL_CERT_FILE (--plain-http for a registry without TLS)"
	}
	return ""
}
