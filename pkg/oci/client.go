package oci

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Client is oprov's one registry client: the network policy (TLS, plain HTTP, credentials), the
// limits a registry cannot push oprov past and the user agent, built once by the CLI from its
// flags and environment and handed to every command and service that reaches a registry.
type Client struct {
	Options
	Limits    Limits
	UserAgent string // sent with every request; "oprov" when empty
	// Trace, when set, hears of every request: method, URL (credentials redacted), status, timing
	// and the bytes of the body read. Headers are never written.
	Trace io.Writer
	// Dial, when set, opens every reference instead of the network or the disk: how a test gives
	// a command a registry of its own.
	Dial func(ctx context.Context, ref Ref, create bool) (Target, error)
}

// NewClient gives a client with opts and the default limits.
func NewClient(opts Options) *Client {
	return &Client{Options: opts, Limits: DefaultLimits()}
}

// Open opens the repository a reference names. For a layout, the directory is created when
// create is true and must exist otherwise.
func (c *Client) Open(ctx context.Context, ref Ref, create bool) (Target, error) {
	if c == nil {
		c = NewClient(Options{})
	}
	if c.Dial != nil {
		return c.Dial(ctx, ref, create)
	}
	if ref.IsLayout() {
		return openLayout(ctx, ref.Layout, create)
	}
	repo, err := c.repository(ctx, ref)
	if err != nil {
		return nil, err
	}
	return repo, nil
}

// Transport is the HTTP transport the client talks through, to registries and to anything else
// oprov fetches over the network (origin registries): TLS per the options, waits bounded and
// bodies watched for progress per the limits (see StallError), traced with OPROV_DEBUG_HTTP=1.
func (c *Client) Transport() (http.RoundTripper, error) {
	if c == nil {
		c = NewClient(Options{})
	}
	tlsConfig, err := TLSConfig(c.CAFile)
	if err != nil {
		return nil, err
	}
	rt := newTransport(c.limits().StallTimeout, tlsConfig)
	if c.Trace != nil {
		rt = &traceTransport{next: rt, start: time.Now(), w: c.Trace}
	}
	return rt, nil
}

func (c *Client) userAgent() string {
	if c == nil || c.UserAgent == "" {
		return "oprov"
	}
	return c.UserAgent
}

// SetUserAgent sets the client's user agent on a request.
func (c *Client) SetUserAgent(req *http.Request) { req.Header.Set("User-Agent", c.userAgent()) }

func (c *Client) limits() Limits { return c.Bounds() }

// Bounds gives the limits the client applies: the defaults for any not set, and for a nil client.
func (c *Client) Bounds() Limits {
	if c == nil {
		return DefaultLimits()
	}
	return c.Limits.WithDefaults()
}
