// Command oprov packages OpenTofu providers as OCI artifacts, pushes them to container
// registries, and pulls and inspects them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/oprov/oprov/pkg/oci"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitInterrupted is what shells give a command SIGINT ended.
	exitInterrupted = 130
)

// IOStreams are the command's standard streams, injected so tests can run commands directly.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// ErrTTY is true when ErrOut is a terminal: progress is shown only then.
	ErrTTY bool
	// InTTY is true when In is a terminal: prompts are shown only then.
	InTTY bool
}

func systemStreams() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		InTTY:  term.IsTerminal(int(os.Stdin.Fd())),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, systemStreams(), os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes one command line and gives the exit code.
func run(ctx context.Context, io *IOStreams, args []string) int {
	oci.UserAgent = "oprov/" + version
	root := newRootCmd(io)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if interrupted(ctx, err) {
		fmt.Fprintln(io.ErrOut, "oprov: interrupted; nothing half-written was kept")
		return exitInterrupted
	}
	var ce *exitCodeError
	if errors.As(err, &ce) {
		if !ce.quiet {
			fmt.Fprintf(io.ErrOut, "oprov: %s\n", ce.msg)
		}
		return ce.code
	}
	fmt.Fprintf(io.ErrOut, "oprov: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitError
}

// exitCodeError passes a child program's exit code through.
type exitCodeError struct {
	code  int
	msg   string
	quiet bool // the child already said what went wrong
}

func (e *exitCodeError) Error() string { return e.msg }

// usageError marks an error in how the command was called: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

func newRootCmd(io *IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "oprov",
		Short: "Package, push, sign and load OpenTofu providers through OCI registries",
		Long: `oprov turns OpenTofu providers into OCI artifacts, publishes them to any container
registry or OCI layout, and pulls and inspects them. OpenTofu >= 1.10 installs what it
publishes natively through an oci_mirror block.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	registerLimits(root)
	root.AddCommand(
		newPackageCmd(io),
		newPushCmd(io),
		newPullCmd(io),
		newInspectCmd(io),
		newLoginCmd(io),
		newLogoutCmd(io),
		newSignCmd(io),
		newVerifyCmd(io),
		newKeygenCmd(io),
		newLockCmd(io),
		newInstallCmd(io),
		newInitCmd(io),
		newTofurcCmd(io),
		newSchemaCmd(io),
		newRunCmd(io),
		newMirrorCmd(io),
		newCopyCmd(io),
		newSaveCmd(io),
		newLoadCmd(io),
		newAttachCmd(io),
		newDiscoverCmd(io),
		newServeCmd(io),
		newCacheCmd(io),
	)
	return root
}

// argsRange is cobra.RangeArgs (max < 0: no maximum) with a usage error and a message that says
// what is wanted.
func argsRange(min, max int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return usageErrorf("%s wants %s (see '%s --help')", c.CommandPath(), what, c.CommandPath())
		}
		return nil
	}
}
