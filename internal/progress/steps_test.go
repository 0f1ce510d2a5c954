package progress

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStepsPlain: without a terminal, a plain line as each step starts and as it ends, with the
// time it took and the count; nothing redrawn (no carriage return, no escape).
func TestStepsPlain(t *testing.T) {
	var out bytes.Buffer
	s := NewSteps(&out, false, 2)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	s.Start("building hello for linux/amd64")
	s.Start("building hello for linux/arm64")
	now = now.Add(8200 * time.Millisecond)
	s.Done("building hello for linux/amd64", nil)
	now = now.Add(65 * time.Second)
	s.Done("building hello for linux/arm64", errors.New("boom"))
	s.Finish()
	want := "building hello for linux/amd64: started (1/2)\n" +
		"building hello for linux/arm64: started (2/2)\n" +
		"building hello for linux/amd64: done in 8.2s (1/2)\n" +
		"building hello for linux/arm64: failed after 1m13s\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
}

// TestStepsTerminal: on a terminal, the status line names the steps under way and how long
// each has run; each end is a line of its own, and the status line is cleared at the end.
func TestStepsTerminal(t *testing.T) {
	var out bytes.Buffer
	s := NewSteps(&out, true, 4)
	now := time.Unix(1000, 0)
	s.mu.Lock()
	s.now = func() time.Time { return now }
	s.mu.Unlock()
	s.Start("building hello for darwin/arm64")
	s.mu.Lock()
	now = now.Add(3 * time.Second)
	s.mu.Unlock()
	if got := s.Status(); got != "0/4 done; under way: building hello for darwin/arm64 (3.0s)" {
		t.Errorf("status %q", got)
	}
	s.Done("building hello for darwin/arm64", nil)
	if got := s.Status(); got != "" {
		t.Errorf("status with nothing under way: %q", got)
	}
	s.Finish()
	s.Finish()
	text := out.String()
	if !strings.Contains(text, "\r\x1b[Kbuilding hello for darwin/arm64: done in 3.0s (1/4)\n") {
		t.Errorf("no line of its own for the step's end:\n%q", text)
	}
	if strings.HasSuffix(text, "(3.0s)") || strings.Count(text, "\n") != 1 {
		t.Errorf("the status line is left on screen, or lines were added:\n%q", text)
	}
}
