//go:build unix

package loader

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRunInitPassesCtrlCOn: Ctrl-C while tofu init runs ends oprov's context and reaches tofu as
// SIGINT; tofu decides how to stop (here: it notes the signal and exits 3) and RunInit waits for it
// and gives its code, rather than killing it for the context.
func TestRunInitPassesCtrlCOn(t *testing.T) {
	keep := make(chan os.Signal, 4) // the test process itself outlives the signal
	signal.Notify(keep, os.Interrupt)
	defer signal.Stop(keep)
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	program := filepath.Join(dir, "fake-tofu")
	script := "#!/bin/sh\ntrap 'echo INT > \"$OPROV_TEST_GOT\"; exit 3' INT\n: > \"$OPROV_TEST_READY\"\nwhile :; do sleep 0.05; done\n"
	writeTestFile(t, program, script)
	if err := os.Chmod(program, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPROV_TEST_READY", ready)
	t.Setenv("OPROV_TEST_GOT", got)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &Project{Dir: dir}
	type result struct {
		code int
		err  error
	}
	res := make(chan result, 1)
	go func() {
		code, err := p.RunInit(ctx, program, "cli.tfrc", nil, Streams{})
		res <- result{code, err}
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if i == 500 {
			t.Fatal("the program never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// What Ctrl-C does to oprov: the process gets SIGINT and the command's context ends.
	cancel()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		if r.err != nil || r.code != 3 {
			t.Errorf("RunInit = %d, %v; want tofu's own exit code 3", r.code, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunInit did not return after SIGINT")
	}
	if _, err := os.Stat(got); err != nil {
		t.Errorf("tofu never saw SIGINT (killed instead?): %v", err)
	}

	// An interrupt before tofu starts: it is not started at all.
	os.Remove(ready)
	if _, err := p.RunInit(ctx, program, "cli.tfrc", nil, Streams{}); err == nil {
		t.Error("RunInit started the program under an ended context")
	}
	if _, err := os.Stat(ready); err == nil {
		t.Error("the program ran under an ended context")
	}
}
