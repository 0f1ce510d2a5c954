// Command pipefault stands between a near side and the far command it runs, as ssh does, and on
// SIGUSR1 ends the connection in one of the ways a connection ends:
//
//	pipefault MODE PIDFILE CMD [ARGS...]
//
// It writes CMD's process ID to PIDFILE once CMD runs, passes its own standard input to CMD's and
// CMD's standard output to its own, and on SIGUSR1:
//
//   - input: closes CMD's input (CMD reads EOF) and keeps reading its output: a stream left
//     half-open, as ssh leaves it when the near side's input ends first;
//   - output: closes the reading end of CMD's output (CMD's next write fails) and keeps CMD's
//     input open: the other half;
//   - kill: kills itself with SIGKILL, so both ends close at once, mid-write or not: the near
//     process killed -9;
//   - silent: passes nothing more either way and closes nothing: a network dropped without a word.
//
// It exits with CMD's exit code once CMD has ended.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: pipefault input|output|kill|silent PIDFILE CMD [ARGS...]")
		os.Exit(2)
	}
	mode := os.Args[1]
	switch mode {
	case "input", "output", "kill", "silent":
	default:
		fmt.Fprintf(os.Stderr, "pipefault: unknown mode %q (input, output, kill, silent)\n", mode)
		os.Exit(2)
	}
	// Both pipes are made here, not by exec.Cmd, so that each end is closed only when a fault says.
	inR, inW, err := os.Pipe()
	if err != nil {
		fail(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		fail(err)
	}
	cmd := exec.Command(os.Args[3], os.Args[4:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	inR.Close()
	outW.Close()
	if err := os.WriteFile(os.Args[2], []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		fail(err)
	}
	var quiet atomic.Bool
	// pass copies until the fault, then (silent) holds still, reading nothing more.
	pass := func(dst io.Writer, src io.Reader) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if quiet.Load() {
				select {}
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() { pass(inW, os.Stdin); inW.Close() }()
	go pass(os.Stdout, outR)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		<-sig
		switch mode {
		case "input":
			inW.Close()
		case "output":
			outR.Close()
		case "kill":
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case "silent":
			quiet.Store(true)
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pipefault:", err)
	os.Exit(1)
}
