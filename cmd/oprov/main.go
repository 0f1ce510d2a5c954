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
	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/sandbox"
)

// version, when set at build time with -ldflags "-X main.version=...", overrides the version
// read from the build info (see currentVersion).
var version = "dev"

// commit, when set at build time with -ldflags "-X main.commit=...", is the commit a release was
// built from (GoReleaser sets it: its builds carry no VCS stamp).
var commit = ""

// Exit codes (exitcodes.go says how an error is classed, and 'oprov help exit-codes' lists them).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitUnreachable: the registry could not be asked (network, TLS) or failed (5xx, 429).
	exitUnreachable = 3
	// exitAuth: the registry refused the credentials or wants some (401, 403), as gh's 4.
	exitAuth = 4
	// exitRefused: verification or the trust policy refused the version (cosign's 10: no
	// matching signature).
	exitRefused = 10
	// exitNotFound: no such version or repository (cosign's 11: no such tag).
	exitNotFound = 11
	// exitUnsigned: refused because the version is not signed at all (cosign's 12).
	exitUnsigned = 12
	// Under 'oprov run' and 'oprov init', which end with the wrapped command's own code, oprov's
	// own failures take the codes docker run, env, timeout and chroot use, which tofu and
	// terraform never do (wrapped.go):
	// exitWrapperFailed: oprov itself failed (a bad flag, a refused provider, anything).
	exitWrapperFailed = 125
	// exitCannotRun: the command was found but cannot be run (not executable, bad format).
	exitCannotRun = 126
	// exitCommandNotFound: no such command.
	exitCommandNotFound = 127
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
	// Factory builds what a command reaches beyond its streams (the registry client, the cache,
	// login), as gh's cmdutil.Factory.
	Factory Factory
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
	if len(os.Args) > 1 && os.Args[1] == loader.RemoteProviderCommand {
		os.Exit(runRemoteProvider(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == plugin.RemoteBrokerCommand {
		os.Exit(runRemoteBroker(os.Stderr))
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
	cmd, err := root.ExecuteContextC(ctx)
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
	msg := err.Error()
	if a := advice(err); a != "" {
		msg += " (" + a + ")"
	}
	fmt.Fprintf(io.ErrOut, "oprov: %s\n", msg)
	code := exitCode(err)
	if wrapsCommand(cmd) {
		code = wrapperExitCode(err)
	}
	var answered *answeredError
	if !errors.As(err, &answered) && (wantsJSON(cmd) || failedFlagsWantJSON(cmd, err, args)) {
		// A script that asked for JSON gets a JSON answer on failure too.
		writeJSON(io.Out, struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}{msg, code})
	}
	return code
}

// answeredError is a failure the command has already answered on stdout in its own JSON (verify's
// {"verified": false, ...}): run still says why on stderr, and writes no second document.
type answeredError struct{ err error }

func (e *answeredError) Error() string { return e.err.Error() }
func (e *answeredError) Unwrap() error { return e.err }

// answered marks err, from a command that has written its JSON answer already, as answered
// (with -o json; nil stays nil).
func answered(o outputFlag, err error) error {
	if err == nil || !o.JSON() {
		return err
	}
	return &answeredError{err}
}

// wantsJSON reports whether the command that ran was asked for -o json.
func wantsJSON(c *cobra.Command) bool {
	if c == nil {
		return false
	}
	f := c.Flags().Lookup("output")
	return f != nil && f.Value.String() == "json"
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
type usageError struct {
	err error
	// flags: the command line's flags could not be parsed.
	flags bool
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

func newRootCmd(io *IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "oprov",
		Short: "Publish, sign, install and serve OpenTofu providers through OCI registries",
		Long: `oprov keeps OpenTofu providers in any OCI registry: one repository per provider, one tag
per version. Publishers package, push and sign. Beside your .tf files, oprov.hcl says which
providers oprov manages: 'oprov init' verifies and installs them for tofu, and 'oprov run'
launches them for tofu under audit, rules and a sandbox, here or on another machine over ssh
('oprov help remote'). 'oprov serve' is a verifying mirror for plain tofu; save and load carry
providers and modules into an air gap. OpenTofu 1.10 and later
also install what oprov publishes through an oci_mirror block.

Concepts, guides and the oprov.hcl reference: ` + docsURL + `
Environment variables and files: 'oprov help environment'.`,
		Example: `  oprov package --go ./examples/hello --version 1.0.0 --out-dir dist
  oprov push dist registry.example.com/providers/acme/hello
  oprov init
  oprov run -- tofu apply`,
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
		return &usageError{err: fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()), flags: true}
	})
	registerLimits(root, &io.Factory)
	root.AddCommand(
		newPackageCmd(io),
		newPushCmd(io),
		newPullCmd(io),
		newInspectCmd(io),
		newLoginCmd(io),
		newLogoutCmd(io),
		newSignCmd(io),
		newVerifyCmd(io),
		newVerifyBlobCmd(io),
		newTrustedRootCmd(io),
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
	root.AddCommand(newExitCodesTopic())
	for _, extra := range extraCommands {
		root.AddCommand(extra(io))
	}
	addBuiltinExamples(root)
	addHelpTopics(root)
	groupCommands(root)
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
			// cobra's own argument checks exit 1 (or print help and exit 0): bad usage is 2.
			c.Args = func(c *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usageErrorf("completion wants a subcommand, a shell: bash, zsh, fish or powershell, not %q (see '%s --help')", args[0], c.CommandPath())
				}
				return nil
			}
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
			for _, sh := range c.Commands() {
				sh.Example = shells[sh.Name()]
				sh.Args = argsRange(0, 0, "no arguments")
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
