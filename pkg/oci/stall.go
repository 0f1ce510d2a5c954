package oci

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StallError is a registry that stopped answering: it let a connection, a TLS handshake or a
// response's headers wait a whole stall timeout, or moved less than minProgress bytes of a body
// in one.
type StallError struct {
	Host    string
	Phase   string // "connecting", "the TLS handshake", "waiting for the response", ...
	Timeout time.Duration
	Bytes   int64 // what moved in the last window, when something did
}

func (e *StallError) Error() string {
	got := "nothing for " + e.Timeout.String()
	if e.Bytes > 0 {
		got = fmt.Sprintf("only %d byte(s) in %s", e.Bytes, e.Timeout)
	}
	return fmt.Sprintf("the registry %s stopped answering: %s during %s (raise the %s if it is only slow)",
		e.Host, got, e.Phase, SettingStallTimeout)
}

// stallTransport turns a transport's timeouts into StallErrors (which are not retried: a registry
// that stopped answering once is not asked again and again) and watches request and response
// bodies for progress.
type stallTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

// newTransport is the HTTP transport oprov talks to registries through: TLS per tlsConfig; the
// connect, the TLS handshake and the wait for response headers each bounded by the stall
// timeout; request and response bodies watched for progress (see StallError).
func newTransport(timeout time.Duration, tlsConfig *tls.Config) http.RoundTripper {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tlsConfig
	base.MaxIdleConnsPerHost = 16
	base.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	base.TLSHandshakeTimeout = timeout
	base.ResponseHeaderTimeout = timeout
	return &stallTransport{next: base, timeout: timeout}
}

func (t *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	parent := req.Context()
	ctx, cancel := context.WithCancelCause(parent)
	wd := &watchdog{host: req.URL.Host, window: t.timeout, cancel: cancel}
	req = req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		// Watched from the transport's first read: connecting has its own timeout.
		req.Body = &watchedBody{rc: req.Body, wd: wd, ctx: ctx, phase: "the upload of the request body"}
	}
	resp, err := t.next.RoundTrip(req)
	wd.stop()
	if err != nil {
		var stall *StallError
		switch cause := context.Cause(ctx); {
		case errors.As(cause, &stall):
			err = stall
		case parent.Err() == nil && isTimeout(err):
			err = &StallError{Host: req.URL.Host, Phase: timeoutPhase(err), Timeout: t.timeout}
		}
		cancel(nil)
		return nil, err
	}
	resp.Body = &watchedBody{rc: resp.Body, wd: wd, ctx: ctx, release: func() { cancel(nil) }}
	wd.start("the download of the response body")
	return resp, nil
}

// timeoutPhase says which of the transport's waits timed out, from its error.
func timeoutPhase(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "TLS handshake"):
		return "the TLS handshake"
	case strings.Contains(msg, "awaiting response headers"):
		return "the wait for the response headers"
	case strings.Contains(msg, "dial"):
		return "connecting"
	}
	return "the request"
}

// watchdog cancels a request whose body moves less than minProgress bytes in a window.
type watchdog struct {
	host   string
	window time.Duration
	cancel context.CancelCauseFunc
	moved  atomic.Int64

	mu      sync.Mutex
	timer   *time.Timer
	phase   string
	running bool
}

func (w *watchdog) start(phase string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase, w.running = phase, true
	w.moved.Store(0)
	if w.timer == nil {
		w.timer = time.AfterFunc(w.window, w.check)
	} else {
		w.timer.Reset(w.window)
	}
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running = false
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *watchdog) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running {
		return
	}
	if n := w.moved.Swap(0); n < minProgress {
		w.running = false
		w.cancel(&StallError{Host: w.host, Phase: w.phase, Timeout: w.window, Bytes: n})
		return
	}
	w.timer.Reset(w.window)
}

// watchedBody counts what moves through a body for its watchdog, and reports a stall as such
// rather than as the cancellation it caused.
type watchedBody struct {
	rc      io.ReadCloser
	wd      *watchdog
	ctx     context.Context
	release func() // for a response: frees the request's context once the body is closed
	phase   string // for a request: the watchdog starts at the first read
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.phase != "" {
		b.wd.start(b.phase)
		b.phase = ""
	}
	n, err := b.rc.Read(p)
	b.wd.moved.Add(int64(n))
	switch {
	case err == io.EOF:
		b.wd.stop()
	case err != nil:
		var stall *StallError
		if errors.As(context.Cause(b.ctx), &stall) {
			err = stall
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.rc.Close()
	if b.release != nil {
		b.wd.stop()
		b.release()
	}
	return err
}
