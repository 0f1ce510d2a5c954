package main

import (
	"errors"
	"io/fs"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"
)

// wrapsCommand reports whether c is a command that ends with a program's own exit code ('oprov
// run' and 'oprov init'): its own failures then take codes the program does not use.
func wrapsCommand(c *cobra.Command) bool {
	if c == nil || c.Parent() == nil || c.Parent().HasParent() {
		return false
	}
	switch c.Name() {
	case "run", "init":
		return true
	}
	return false
}

// wrapperExitCode is the exit code of a failure of 'oprov run' or 'oprov init' before or around
// the command they run, as docker run, env, timeout and chroot give it: 127 the command was not
// found, 126 it was found but could not be run, 125 oprov itself failed (usage, a refused or
// unreachable provider, anything else). tofu and terraform use none of them, so a script that
// runs 'oprov run -- tofu plan -detailed-exitcode' reads 2 as "the plan has changes" only.
func wrapperExitCode(err error) int {
	var ce *commandError
	if errors.As(err, &ce) {
		return ce.code
	}
	// The command passed the look-up but the system would not start it.
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Op, "fork/exec") {
		if errors.Is(err, fs.ErrNotExist) {
			return exitCommandNotFound
		}
		return exitCannotRun
	}
	return exitWrapperFailed
}

// commandError is a command line naming a program that cannot be found (127) or run (126).
type commandError struct {
	code int
	err  error
}

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// lookPathError classes exec.LookPath's failure for the program a command line names: not found,
// or found but not runnable (a directory, no execute permission).
func lookPathError(lookErr, err error) error {
	code := exitCannotRun
	if errors.Is(lookErr, exec.ErrNotFound) || errors.Is(lookErr, fs.ErrNotExist) {
		code = exitCommandNotFound
	}
	return &commandError{code: code, err: err}
}

// failedFlagsWantJSON reports whether a command whose flags could not be parsed was asked for
// -o json on its command line: pflag stops at the bad flag, so -o may never have been set.
func failedFlagsWantJSON(c *cobra.Command, err error, args []string) bool {
	var ue *usageError
	if c == nil || c.Flags().Lookup("output") == nil || !errors.As(err, &ue) || !ue.flags {
		return false
	}
	format := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return format == "json"
		case a == "-o" || a == "--output":
			if i+1 < len(args) {
				format = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--output="):
			format = strings.TrimPrefix(a, "--output=")
		case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "--"):
			format = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		}
	}
	return format == "json"
}
