//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO named as the recording (its writer someone else, or nobody) neither blocks provider
// check nor is read: it is refused as no regular file.
func TestProviderCheckRefusesAFIFOAsRecording(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "apply.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan struct{})
	var stderr string
	var code int
	go func() {
		defer close(done)
		_, stderr, code = runCLIWithInput(t, "", "provider", "check", "--json", "--recording", fifo)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("provider check --recording FIFO blocked waiting for a writer")
	}
	if code != 2 || !strings.Contains(stderr, "not a regular file") {
		t.Errorf("--recording FIFO: exit %d, want 2 saying it is not a regular file\n%s", code, stderr)
	}
}
