// Package progress is oprov's one progress display: bytes moved out of bytes planned, with the
// rate and the time left, on one line redrawn in place on a terminal's stderr. It implements
// oci.Progress, so every transfer (push, pull, copy, save, load, mirror, install) reports to it
// the same way. It never shows more than 100%, and it prints nothing when stderr is not a terminal.
// Steps (steps.go) is its counterpart for work measured in steps rather than bytes (each
// platform's build): a status line on a terminal, a plain line per start and end elsewhere.
package progress

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// redraw is how often the line is redrawn.
const redraw = 200 * time.Millisecond

// Bar shows one transfer's progress. Its methods may be called from several goroutines.
type Bar struct {
	w       io.Writer
	label   string
	now     func() time.Time
	planned atomic.Int64
	done    atomic.Int64
	started atomic.Int64 // unix nanoseconds of the first byte moved, 0 before
	stop    chan struct{}
	wg      sync.WaitGroup
	active  bool
	drawn   bool // a line has been drawn, so Finish ends it
}

// New makes a bar that draws on w when tty is true (w is a terminal), and is silent otherwise.
func New(w io.Writer, tty bool, label string) *Bar {
	b := &Bar{w: w, label: label, now: time.Now, stop: make(chan struct{})}
	if !tty {
		return b
	}
	b.active = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(redraw)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				b.draw()
			}
		}
	}()
	return b
}

// Plan adds bytes that are going to move.
func (b *Bar) Plan(n int64) { b.planned.Add(n) }

// Advance records bytes that moved.
func (b *Bar) Advance(n int64) {
	if n > 0 {
		b.started.CompareAndSwap(0, b.now().UnixNano())
	}
	b.done.Add(n)
}

// Finish stops redrawing and ends the line. It is safe to call more than once.
func (b *Bar) Finish() {
	if !b.active {
		return
	}
	close(b.stop)
	b.wg.Wait()
	b.active = false
	b.draw()
	if b.drawn {
		fmt.Fprintln(b.w)
	}
}

func (b *Bar) draw() {
	if s := b.Line(b.now()); s != "" {
		fmt.Fprintf(b.w, "\r%s   ", s)
		b.drawn = true
	}
}

// Line is what the bar shows at now: "pushing 45.0 MB / 100.0 MB (45%), 9.0 MB/s, 6s left", or ""
// before anything is planned or moved. More bytes than planned (a size that was not known up
// front) raise the total, so the share never passes 100%.
func (b *Bar) Line(now time.Time) string {
	done, total := b.done.Load(), b.planned.Load()
	if done > total {
		total = done
	}
	if total == 0 {
		return ""
	}
	s := fmt.Sprintf("%s %s / %s (%d%%)", b.label, HumanBytes(done), HumanBytes(total), done*100/total)
	start := b.started.Load()
	elapsed := now.Sub(time.Unix(0, start))
	if start == 0 || elapsed < time.Second || done == 0 {
		return s // too early for a rate that means anything
	}
	rate := float64(done) / elapsed.Seconds()
	s += fmt.Sprintf(", %s/s", HumanBytes(int64(rate)))
	if left := total - done; left > 0 {
		s += ", " + timeLeft(time.Duration(float64(left)/rate*float64(time.Second))) + " left"
	}
	return s
}

// timeLeft rounds d for people: "<1s", "42s", "3m05s", "2h10m".
func timeLeft(d time.Duration) string {
	switch {
	case d < time.Second:
		return "<1s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// HumanBytes writes n in SI units: 999 B, 1.0 kB, 104.9 MB.
func HumanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
