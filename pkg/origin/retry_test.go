package origin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"0":                             0,
		"7":                             7 * time.Second,
		" 12 ":                          12 * time.Second,
		"Fri, 02 Jan 2026 03:04:35 GMT": 30 * time.Second,
		"Fri, 02 Jan 2026 03:00:00 GMT": 0, // in the past
	} {
		got, ok := retryAfter(http.Header{"Retry-After": {v}}, now)
		if !ok || got != want {
			t.Errorf("Retry-After %q: %s, %v; want %s", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "soon", "1.5"} {
		if _, ok := retryAfter(http.Header{"Retry-After": {v}}, now); ok {
			t.Errorf("Retry-After %q was taken", v)
		}
	}
}

func TestRetryPolicyBounds(t *testing.T) {
	p := retryPolicy{attempts: 4, first: time.Second, maxWait: 3 * time.Second, budget: 5 * time.Second}
	e := &transientError{err: errors.New("x")}
	var waited time.Duration
	for attempt := 1; attempt <= 2; attempt++ {
		d, stop := p.wait(attempt, waited, e)
		if stop != "" || d < 800*time.Millisecond || d > 3*time.Second {
			t.Fatalf("attempt %d: wait %s, stop %q", attempt, d, stop)
		}
		waited += d
	}
	if _, stop := p.wait(3, 4*time.Second, e); !strings.Contains(stop, "of waiting") {
		t.Errorf("the waiting budget was not kept: %q", stop)
	}
	if _, stop := p.wait(4, 0, e); stop != "gave up after 4 attempts" {
		t.Errorf("the attempt cap was not kept: %q", stop)
	}
	if d, stop := p.wait(1, 0, &transientError{hasAfter: true, after: 2 * time.Second}); stop != "" || d != 2*time.Second {
		t.Errorf("Retry-After: wait %s, stop %q", d, stop)
	}
}

func TestTransientNetError(t *testing.T) {
	ctx := context.Background()
	refused := fmt.Errorf("dial: %w", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED})
	if transientNetError(ctx, refused, false) {
		t.Error("a refusal from a host that never answered is retried")
	}
	if !transientNetError(ctx, refused, true) {
		t.Error("a refusal from a host that answered before is not retried")
	}
	if !transientNetError(ctx, &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}, false) {
		t.Error("a reset is not retried")
	}
	if transientNetError(ctx, errors.New("x509: certificate signed by unknown authority"), true) {
		t.Error("a certificate error is retried")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if transientNetError(cancelled, &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}, true) {
		t.Error("retried after the context ended")
	}
}
