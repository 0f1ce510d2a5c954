// Command rsswrap runs a command and writes its peak resident set size (KiB) to a file:
//
//	rsswrap OUT CMD [ARGS...]
//
// Measuring from a small process matters: on Linux, exec records the previous memory map's
// high-water mark into the child's ru_maxrss, and Go starts children with a clone that shares the
// parent's memory, so a large test binary measuring its own child directly would see its own
// size. The wrapper is small, so what it reports is the command's peak.
//
// SIGTERM and SIGINT are passed on to the command, so a server can be measured through a graceful
// stop.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: rsswrap OUT CMD [ARGS...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "rsswrap:", err)
		os.Exit(2)
	}
	go func() {
		for s := range sig {
			cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "rsswrap:", err)
		os.Exit(2)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if werr := os.WriteFile(os.Args[1], []byte(fmt.Sprint(ru.Maxrss)), 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, "rsswrap:", werr)
		os.Exit(2)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
