// Package signals is the one place oprov listens for SIGINT and SIGTERM: the command's context
// ends at the first, a server hears of the second, and a child program (tofu) gets them passed
// on rather than being killed.
package signals

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// stopSignals are the signals that ask oprov to stop.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// KillAfter is how long a child that ignores a passed-on signal has before it is killed.
const KillAfter = 30 * time.Second

type againKey struct{}

// Context gives a context that ends at the first SIGINT or SIGTERM; Again on it (or on a context
// derived from it) gives a channel closed at the second. stop stops listening, and ends the
// context.
func Context(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	again, done := make(chan struct{}), make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, stopSignals...)
	go func() {
		for n := 0; ; {
			select {
			case <-sigs:
				switch n++; n {
				case 1:
					cancel()
				case 2:
					close(again)
				}
			case <-done:
				return
			}
		}
	}()
	ctx = context.WithValue(ctx, againKey{}, (<-chan struct{})(again))
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// Again is closed when a second SIGINT or SIGTERM arrives under a context from Context (the
// first ended it). Under any other context it is nil: it never closes.
func Again(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(againKey{}).(<-chan struct{})
	return ch
}

// Run starts cmd, passes SIGINT and SIGTERM on to it while it runs (killing it if it ignores them
// for killAfter), waits for it, and gives its exit code: 128+N when a signal N ended it. The
// child decides what a signal means, as it would in a shell; it is never killed for a context.
func Run(cmd *exec.Cmd, killAfter time.Duration) (int, error) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, stopSignals...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var killTimer <-chan time.Time
	for {
		select {
		case s := <-sigs:
			cmd.Process.Signal(s)
			if killTimer == nil {
				killTimer = time.After(killAfter)
			}
		case <-killTimer:
			cmd.Process.Kill()
		case err := <-done:
			return exitCodeFor(err)
		}
	}
}

// exitCodeFor turns a finished command's error into its exit code (128+N when a signal N ended it);
// an error that is not an exit status is returned.
func exitCodeFor(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, err
	}
	code := ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && code < 0 && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return code, nil
}
