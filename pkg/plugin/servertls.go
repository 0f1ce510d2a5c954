package plugin

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// Some providers serve TLS whether or not the client offered a certificate: the Python SDK tf
// always does, with a self-signed certificate it sends in the handshake line. When oprov starts a
// provider for reattaching it offers no certificate, and go-plugin with no TLS configuration
// cannot take a server certificate (it would load it into a nil configuration). So such starts
// hand go-plugin a TLS configuration of their own and dial through serverChosenTLS, which speaks
// TLS only when the handshake line carried a certificate: go-plugin puts it into RootCAs before
// it dials.

// reattachTLSConfig is the configuration a start for reattaching gives go-plugin: no client
// certificate, and the server's certificate, if it sends one, as the only root.
func reattachTLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "localhost"}
}

// servesTLS reports whether the provider sent a certificate in its handshake line.
func servesTLS(c *tls.Config) bool { return c != nil && c.RootCAs != nil }

// serverChosenTLS is gRPC transport credentials that speak TLS with cfg when the provider sent
// a certificate, and plain gRPC over the private unix socket otherwise.
type serverChosenTLS struct{ cfg *tls.Config }

type plainAuth struct{ credentials.CommonAuthInfo }

func (plainAuth) AuthType() string { return "insecure" }

func (s serverChosenTLS) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if servesTLS(s.cfg) {
		return credentials.NewTLS(s.cfg).ClientHandshake(ctx, authority, conn)
	}
	return conn, plainAuth{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (s serverChosenTLS) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("oprov does not serve providers")
}

// Info names the server "localhost" (the name go-plugin's certificates carry); gRPC makes it
// the channel's authority, which the TLS handshake checks the certificate against.
// (ServerName is deprecated in grpc-go, but still what it takes the authority from for custom
// credentials.)
func (s serverChosenTLS) Info() credentials.ProtocolInfo {
	if servesTLS(s.cfg) {
		//lint:ignore SA1019 see above
		return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2", ServerName: s.cfg.ServerName}
	}
	//lint:ignore SA1019 see above
	return credentials.ProtocolInfo{SecurityProtocol: "insecure", ServerName: s.cfg.ServerName}
}

func (s serverChosenTLS) Clone() credentials.TransportCredentials { return s }

func (s serverChosenTLS) OverrideServerName(string) error { return nil }
