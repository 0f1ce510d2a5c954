//go:build unix

package signals

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRunPassesSignalsOn: a SIGINT to oprov reaches the child, which decides what it means (here:
// exit 3); the child is waited for, not killed.
func TestRunPassesSignalsOn(t *testing.T) {
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	cmd := exec.Command("sh", "-c", `trap 'echo INT > "$1"; exit 3' INT; : > "$0"; while :; do sleep 0.05; done`, ready, got)
	res := make(chan int, 1)
	go func() {
		code, err := Run(cmd, time.Minute)
		if err != nil {
			t.Error(err)
		}
		res <- code
	}()
	waitFor(t, ready)
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-res:
		if code != 3 {
			t.Errorf("exit code %d, want the child's own 3", code)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the child did not end after SIGINT")
	}
	if _, err := os.Stat(got); err != nil {
		t.Errorf("the child never saw SIGINT: %v", err)
	}
}

// TestRunKillsAfter: a child that ignores the signal is killed once killAfter has passed, and
// its code says which signal ended it.
func TestRunKillsAfter(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("sh", "-c", `trap '' INT; : > "$0"; while :; do sleep 0.05; done`, ready)
	res := make(chan int, 1)
	go func() {
		code, _ := Run(cmd, 200*time.Millisecond)
		res <- code
	}()
	waitFor(t, ready)
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case code := <-res:
		if code != 128+int(syscall.SIGKILL) {
			t.Errorf("exit code %d, want %d (killed)", code, 128+int(syscall.SIGKILL))
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the child was not killed")
	}
}

// TestContext: the first signal ends the context, the second closes Again.
func TestContext(t *testing.T) {
	if Again(context.Background()) != nil {
		t.Error("Again outside Context is not nil")
	}
	ctx, stop := Context(context.Background())
	defer stop()
	again := Again(ctx)
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first signal did not end the context")
	}
	select {
	case <-again:
		t.Fatal("Again closed at the first signal")
	default:
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case <-again:
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not close Again")
	}
}

func waitFor(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

// TestMain keeps a signal that reaches the test before Run or Context listen from ending it.
func TestMain(m *testing.M) {
	keep := make(chan os.Signal, 8)
	signal.Notify(keep, stopSignals...)
	os.Exit(m.Run())
}
