package progress

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var percent = regexp.MustCompile(`\((\d+)%\)`)

// shownPercent is the share a line shows, or -1 for a line without one.
func shownPercent(t *testing.T, line string) int {
	t.Helper()
	m := percent.FindStringSubmatch(line)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestNeverOver100: more bytes than planned (a size that was not known up front, a plan that
// came late) raise the total; the share shown never passes 100%.
func TestNeverOver100(t *testing.T) {
	b := New(&bytes.Buffer{}, false, "mirroring")
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	b.Plan(100)
	for i, step := range []struct{ plan, advance int64 }{{0, 60}, {0, 90}, {50, 0}, {0, 500}, {1000, 100}, {0, 2000}} {
		b.Plan(step.plan)
		b.Advance(step.advance)
		now = now.Add(time.Second)
		line := b.Line(now)
		if p := shownPercent(t, line); p < 0 || p > 100 {
			t.Errorf("step %d: %q shows %d%%", i, line, p)
		}
	}
	if line := b.Line(now); !strings.HasPrefix(line, "mirroring 2.8 kB / 2.8 kB (100%)") {
		t.Errorf("after 2750 bytes moved of 1150 planned the line is %q", line)
	}
}

// TestRateAndTimeLeft: the rate is bytes moved since the first byte over the time since, and the
// time left is what remains at that rate.
func TestRateAndTimeLeft(t *testing.T) {
	b := New(&bytes.Buffer{}, false, "pushing")
	start := time.Unix(1000, 0)
	b.now = func() time.Time { return start }
	b.Plan(100_000_000)
	b.Advance(20_000_000)
	if got := b.Line(start.Add(500 * time.Millisecond)); got != "pushing 20.0 MB / 100.0 MB (20%)" {
		t.Errorf("before a second has passed: %q (no rate yet)", got)
	}
	b.Advance(20_000_000)
	want := "pushing 40.0 MB / 100.0 MB (40%), 10.0 MB/s, 6s left"
	if got := b.Line(start.Add(4 * time.Second)); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	b.Advance(60_000_000)
	if got := b.Line(start.Add(10 * time.Second)); got != "pushing 100.0 MB / 100.0 MB (100%), 10.0 MB/s" {
		t.Errorf("when done: %q", got)
	}
}

func TestTimeLeft(t *testing.T) {
	for d, want := range map[time.Duration]string{
		300 * time.Millisecond: "<1s", 42 * time.Second: "42s", 185 * time.Second: "3m05s", 130 * time.Minute: "2h10m",
	} {
		if got := timeLeft(d); got != want {
			t.Errorf("timeLeft(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestSilentWhenNotATerminal: a bar on a stream that is not a terminal writes nothing at all.
func TestSilentWhenNotATerminal(t *testing.T) {
	var w bytes.Buffer
	b := New(&w, false, "copying")
	b.Plan(10)
	b.Advance(25)
	b.Finish()
	b.Finish()
	if w.Len() != 0 {
		t.Errorf("a bar off a terminal wrote %q", w.String())
	}
}

// TestTerminalLineEnds: on a terminal the bar redraws one line in place and ends it at Finish;
// a bar that moved nothing leaves no line behind.
func TestTerminalLineEnds(t *testing.T) {
	var w bytes.Buffer
	b := New(&w, true, "saving")
	b.Plan(10)
	b.Advance(25)
	b.Finish()
	b.Finish()
	out := w.String()
	if !strings.HasPrefix(out, "\rsaving 25 B / 25 B (100%)") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("terminal output %q", out)
	}
	var idle bytes.Buffer
	New(&idle, true, "idle").Finish()
	if idle.Len() != 0 {
		t.Errorf("a bar that moved nothing wrote %q", idle.String())
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 104857600: "104.9 MB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
