package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "terraform-provider-bad")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Each kind of bad executable gets a clear error within the start timeout.
func TestBadExecutables(t *testing.T) {
	const timeout = 2 * time.Second
	cases := []struct {
		name, body string
		want       []string
	}{
		{"exits at once", "echo 'no such thing' >&2\nexit 3\n", []string{"exit status 3", "no such thing"}},
		{"prints garbage", "echo 'hello there, I am not a plugin'\nsleep 5\n", []string{"garbled the plugin handshake", "hello there"}},
		{"hangs", "sleep 30\n", []string{"no handshake within the start timeout"}},
		{"speaks only protocol 4", "echo \"1|4|unix|/tmp/oprov-nothing.sock|grpc|\"\nsleep 5\n", []string{"protocol oprov does not", "5 and 6"}},
		{"crashes with a message", "echo 'panic: runtime error: boom' >&2\nexit 2\n", []string{"exit status 2", "panic: runtime error: boom"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			p, err := Start(context.Background(), Options{Path: script(t, tc.body), StartTimeout: timeout})
			took := time.Since(start)
			if err == nil {
				p.Stop(context.Background())
				t.Fatal("a bad executable started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if took > timeout+3*time.Second {
				t.Errorf("took %v, well over the %v start timeout", took, timeout)
			}
		})
	}
	if _, err := Start(context.Background(), Options{Path: filepath.Join(t.TempDir(), "missing")}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing executable: %v", err)
	}
	notExec := filepath.Join(t.TempDir(), "f")
	os.WriteFile(notExec, []byte("x"), 0o644)
	if _, err := Start(context.Background(), Options{Path: notExec}); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Errorf("non-executable: %v", err)
	}
}
