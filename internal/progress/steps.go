package progress

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Steps shows pieces of work that start and end, such as each platform's build of a package. On
// a terminal, each step's end is printed as a line of its own, and below them one line, redrawn
// in place, says how many steps are done and which are under way and for how long; elsewhere
// (a pipe, a CI log) a plain line is printed as each step starts and as it ends. Notes (Note)
// are printed between them. Its methods may be called from several goroutines.
type Steps struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	total int // steps expected, 0 when not known

	mu      sync.Mutex
	started map[string]time.Time
	done    int
	status  bool // the status line is on screen (a terminal only)
	stop    chan struct{}
	wg      sync.WaitGroup
}

// NewSteps makes a display of total steps (0: not known) on w, a terminal when tty is true.
func NewSteps(w io.Writer, tty bool, total int) *Steps {
	s := &Steps{w: w, tty: tty, now: time.Now, total: total, started: map[string]time.Time{}, stop: make(chan struct{})}
	if tty {
		s.wg.Add(1)
		go s.redrawLoop()
	}
	return s
}

func (s *Steps) redrawLoop() {
	defer s.wg.Done()
	t := time.NewTicker(redraw)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.drawStatus()
			s.mu.Unlock()
		}
	}
}

// Start records that a step has started ("building hello for linux/amd64").
func (s *Steps) Start(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started[step] = s.now()
	if !s.tty {
		fmt.Fprintf(s.w, "%s: started%s\n", step, s.count(len(s.started)+s.done))
		return
	}
	s.drawStatus()
}

// Done records that a step has ended, with err when it failed.
func (s *Steps) Done(step string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	took := ""
	if t, ok := s.started[step]; ok {
		took = roundDuration(s.now().Sub(t))
		delete(s.started, step)
	}
	s.done++
	line := fmt.Sprintf("%s: done in %s%s", step, took, s.count(s.done))
	if err != nil {
		line = fmt.Sprintf("%s: failed after %s", step, took)
	}
	s.printLine(line)
}

// Note prints a line about the work that is no step's start or end.
func (s *Steps) Note(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.printLine(line)
}

// Finish stops redrawing and clears the status line. It is safe to call more than once.
func (s *Steps) Finish() {
	s.mu.Lock()
	select {
	case <-s.stop:
		s.mu.Unlock()
		return
	default:
	}
	close(s.stop)
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearStatus()
}

// printLine prints a line of its own, above the status line on a terminal.
func (s *Steps) printLine(line string) {
	s.clearStatus()
	fmt.Fprintln(s.w, line)
	if s.tty {
		s.drawStatus()
	}
}

// count is " (2/4)" when the total is known.
func (s *Steps) count(n int) string {
	if s.total <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%d/%d)", n, s.total)
}

// Status is the terminal's status line: "2/4 done; under way: building hello for linux/arm64 (12s)",
// or "" when nothing is under way.
func (s *Steps) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLine()
}

func (s *Steps) statusLine() string {
	if len(s.started) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.started))
	for n := range s.started {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return s.started[names[i]].Before(s.started[names[j]]) })
	now := s.now()
	for i, n := range names {
		names[i] = fmt.Sprintf("%s (%s)", n, roundDuration(now.Sub(s.started[n])))
	}
	done := fmt.Sprintf("%d done", s.done)
	if s.total > 0 {
		done = fmt.Sprintf("%d/%d done", s.done, s.total)
	}
	return done + "; under way: " + strings.Join(names, ", ")
}

func (s *Steps) drawStatus() {
	if !s.tty {
		return
	}
	line := s.statusLine()
	if line == "" {
		s.clearStatus()
		return
	}
	fmt.Fprintf(s.w, "\r\x1b[K%s", line)
	s.status = true
}

func (s *Steps) clearStatus() {
	if s.status {
		fmt.Fprint(s.w, "\r\x1b[K")
		s.status = false
	}
}

// roundDuration writes a step's time for people: "0.4s", "8.2s", "1m05s".
func roundDuration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return timeLeft(d)
}
