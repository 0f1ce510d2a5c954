package origin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The origin client retries on its own rather than through oras-go's retry.Transport (which
// pkg/oci uses for registries): that transport only sees failures before the response body is
// handed back, so a connection cut while the answer streams in would need a second retry layer
// with a budget of its own, and its policy reads Retry-After only on 429, only in seconds, and
// clamps it to its longest backoff. One loop around request and body covers both with one bound.

// retryPolicy bounds how often, and how long, the origin client tries a GET again.
type retryPolicy struct {
	attempts int           // tries of one request in all
	first    time.Duration // the first backoff; each next one doubles, give or take 20%
	maxWait  time.Duration // the longest single wait, Retry-After included
	budget   time.Duration // the most time spent waiting on one request
}

// defaultRetry gives a flaky origin about a minute to recover. Tests shorten it.
var defaultRetry = retryPolicy{attempts: 5, first: 500 * time.Millisecond, maxWait: 30 * time.Second, budget: 60 * time.Second}

// responseHeaderTimeout is how long one attempt waits for an answer to start before it counts as
// timed out (and is tried again). Tests shorten it.
var responseHeaderTimeout = time.Minute

// transientError is a failure that may pass if the same request is made again.
type transientError struct {
	err      error
	after    time.Duration // what Retry-After asked for,
	hasAfter bool          // if it was sent
}

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// wait says how long to wait before attempt+1, after waiting waited so far, or why not to try
// again.
func (p retryPolicy) wait(attempt int, waited time.Duration, e *transientError) (time.Duration, string) {
	if attempt >= p.attempts {
		return 0, fmt.Sprintf("gave up after %d attempts", attempt)
	}
	d := p.maxWait
	if attempt <= 20 {
		d = min(p.first<<(attempt-1), p.maxWait)
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	if e.hasAfter {
		if e.after > p.maxWait {
			return 0, fmt.Sprintf("the server asks to wait %s before trying again, longer than oprov waits", e.after.Round(time.Second))
		}
		d = e.after
	}
	d = min(d, p.maxWait)
	if waited+d > p.budget {
		return 0, fmt.Sprintf("gave up after %d attempts and %s of waiting", attempt, waited.Round(100*time.Millisecond))
	}
	return d, ""
}

// retrying runs try until it succeeds, fails for good, or the policy gives up, waiting between
// attempts; waiting ends early when ctx does.
func (p retryPolicy) retrying(ctx context.Context, try func() error) error {
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		err := try()
		var te *transientError
		if !errors.As(err, &te) {
			return err
		}
		d, stop := p.wait(attempt, waited, te)
		if stop != "" {
			return fmt.Errorf("%w (%s)", te.err, stop)
		}
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (stopped waiting to try again: %w)", te.err, ctx.Err())
		case <-timer.C:
		}
		waited += d
	}
}

// retryableStatus reports whether an answer with this status may go better later: 429 and the
// 5xx errors, but for 501 and 505, which say the server will never do it. Other 4xx answers are
// the request's fault and are final.
func retryableStatus(code int) bool {
	return code == http.StatusTooManyRequests ||
		code >= 500 && code != http.StatusNotImplemented && code != http.StatusHTTPVersionNotSupported
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, 1<<20)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// transientNetError reports whether a failed exchange may go through if tried again: a reset or
// cut connection, or a timeout. A refused connection counts only when the host has answered
// before in this run (so a server restarting mid-run is waited for, but a wrong host or port
// fails at once). Nothing is retried once ctx is done.
func transientNetError(ctx context.Context, err error, answeredBefore bool) bool {
	if ctx.Err() != nil {
		return false
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.Is(err, syscall.ECONNREFUSED):
		return answeredBefore
	}
	return false
}

// netReader remembers the error reading a response body gave, to tell failures of the network
// from those of whatever consumes the body.
type netReader struct {
	r   io.Reader
	err error
}

func (n *netReader) Read(p []byte) (int, error) {
	c, err := n.r.Read(p)
	if err != nil && err != io.EOF {
		n.err = err
	}
	return c, err
}
