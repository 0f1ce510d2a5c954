// Command oprov packages OpenTofu providers as OCI artifacts, pushes them to container
// registries, and pulls and inspects them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/oprov/oprov/internal/signals"
	"github.com/oprov/oprov/pkg/sandbox"
)

// version, when set at build time with -ldflags "-X main.version=...", overrides the version
// read from the build info (see currentVersion).
var version = "dev"

// commit, when set at build time with -ldflags "-X main.commit=...", is the commit a release was
// built from (GoReleaser sets it: its builds carry no VCS stamp).
var commit = ""

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
	// Deps build what commands reach beyond the streams (registries, the cache).
	Deps Factory
}

func systemStreams() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		InTTY:  term.IsTerminal(int(os.Stdin.Fd())),
	}
}

func main() {
	// The sandbox step oprov starts a provider through: first, so that nothing else runs in the
	// process that becomes the provider.
	if len(os.Args) > 1 && os.Args[1] == sandbox.ExecCommand {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	// Before signal handling and terminal checks, which cost more than printing does.
	if printedVersion(os.Stdout, os.Args[1:]) {
		os.Exit(exitOK)
	}
	if len(os.Args) > 1 && os.Args[1] == stdioHostCommand {
		os.Exit(runStdioHost(os.Args[2:], os.Stderr))
	}
	ctx, stop := signals.Context(context.Background())
	code := run(ctx, systemStreams(), os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes one command line and gives the exit code.
func run(ctx context.Context, io *IOStreams, args []string) int {
	if printedVersion(io.Out, args) {
		return exitOK
	}
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
	if a := advice(err); a != "" {
		fmt.Fprintf(io.ErrOut, "oprov: %v (%s)\n", err, a)
	} else {
		fmt.Fprintf(io.ErrOut, "oprov: %v\n", err)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitError
}

// printedVersion answers 'oprov --version' and 'oprov version', the commonest calls that need no
// command tree, without building one, and reports whether it did.
func printedVersion(w io.Writer, args []string) bool {
	if len(args) != 1 || (args[0] != "--version" && args[0] != "version") {
		return false
	}
	fmt.Fprintln(w, currentVersion())
	return true
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
		Example: `  oprov package --go ./terraform-provider-hello --version 1.0.0 --out-dir dist
  oprov push dist registry.example.com/providers/acme/hello
  oprov init`,
		Version:       currentVersion().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Any argument that reached the root is not a command: bad usage, exit 2.
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return unknownCommand(c, args[0])
		},
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	// --version has no -v: -v is --verbose where a command has it (run, schema).
	root.Flags().Bool("version", false, "print oprov's version")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	registerLimits(root, &io.Deps)
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
		newProviderCmd(io),
		newSandboxCmd(io),
		newVersionCmd(io),
	)
	for _, extra := range extraCommands {
		root.AddCommand(extra(io))
	}
	addBuiltinExamples(root)
	return root
}

// extraCommands are commands only some builds have: the hidden __gendocs of a build with the
// gendocs tag (gendocs.go), which keeps cobra/doc out of the oprov everyone runs.
var extraCommands []func(*IOStreams) *cobra.Command

// unknownCommand is the usage error for a word that names no command, with the nearest names.
func unknownCommand(c *cobra.Command, word string) error {
	hint := ""
	if s := c.SuggestionsFor(word); len(s) > 0 {
		hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usageErrorf("unknown command %q%s; 'oprov --help' lists the commands", word, hint)
}

// addBuiltinExamples gives cobra's own commands (help, completion and its shells) examples, as
// every command has.
func addBuiltinExamples(root *cobra.Command) {
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			found, rest, err := root.Find(args)
			if err == nil && len(rest) > 0 { // a word that names no command
				err = unknownCommand(root, rest[0])
			}
			if err != nil {
				return err
			}
			return found.Help()
		},
	})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	shells := map[string]string{
		"bash":       "  source <(oprov completion bash)",
		"zsh":        `  oprov completion zsh > "${fpath[1]}/_oprov"`,
		"fish":       "  oprov completion fish > ~/.config/fish/completions/oprov.fish",
		"powershell": "  oprov completion powershell | Out-String | Invoke-Expression",
	}
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = "  oprov help push"
		case "completion":
			c.Example = shells["bash"] + "\n" + shells["zsh"] + "\n" + shells["fish"]
			for _, sh := range c.Commands() {
				sh.Example = shells[sh.Name()]
			}
		}
	}
}

// argsRange is cobra.RangeArgs (max < 0: no maximum) with a usage error and a message that says
// what is wanted.
func argsRange(min, max int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return usageErrorf("%s wants %s (see '%s --help')", c.Name(), what, c.CommandPath())
		}
		return nil
	}
}
