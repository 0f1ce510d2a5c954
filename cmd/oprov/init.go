package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
)

type initOptions struct {
	io    *IOStreams
	flags loaderFlags
	// Args follow "init" on the command line of the program (OPROV_TOFU, default tofu).
	Args []string
	// Exec replaces oprov with the program once the providers are installed.
	Exec bool
}

func newInitCmd(ios *IOStreams) *cobra.Command {
	// Exec only with the process's own streams: a caller with its own streams (a test) keeps its
	// process and gets tofu's output.
	o := &initOptions{io: ios, Exec: ios.Out == io.Writer(os.Stdout) && ios.ErrOut == io.Writer(os.Stderr)}
	c := &cobra.Command{
		Use:   "init [-- INIT-ARGS...]",
		Short: "Install the managed providers, then run tofu init with them",
		Long: `Run 'oprov install', then 'tofu init' with the CLI configuration it wrote
(TF_CLI_CONFIG_FILE), passing any arguments after --; oprov hands its process over to tofu
(exec), so signals and the exit code are tofu's own; oprov's own failures before that exit 125
(126, 127: the program cannot be run, or is not found). Set OPROV_TOFU to run another program,
such as terraform. Your own CLI configuration's settings are kept where that is safe; oprov says
what it could not keep. Afterwards plain 'tofu plan' and 'tofu apply' work as usual.

` + loaderHelp,
		Example: `  oprov init
  OPROV_TOFU=terraform oprov init -- -upgrade`,
		RunE: func(c *cobra.Command, args []string) error {
			o.Args = args
			return runInit(c.Context(), o)
		},
	}
	o.flags.register(c)
	return c
}

// tofuProgram is the program init runs: OPROV_TOFU, default tofu.
func tofuProgram() string {
	if p := os.Getenv("OPROV_TOFU"); p != "" {
		return p
	}
	return "tofu"
}

// programAdvice says what to do when the program a command line names cannot be found: for
// tofu or terraform, install OpenTofu or say which program to run (OPROV_TOFU), as init does.
func programAdvice(program string) string {
	switch filepath.Base(program) {
	case "tofu", "terraform", tofuProgram():
		return "install OpenTofu, or set OPROV_TOFU to the program to run"
	}
	return "check the command's name, or give its path"
}

func runInit(ctx context.Context, o *initOptions) error {
	// The directory first: a wrong -C is the likelier mistake, and the cheaper to say.
	if err := checkDir("-C", o.flags.Dir, configDirPurpose); err != nil {
		return err
	}
	program := tofuProgram()
	programPath, err := exec.LookPath(program)
	if err != nil {
		return lookPathError(err, fmt.Errorf("init: cannot run %q: %v (%s)", program, errors.Unwrap(err), programAdvice(program)))
	}
	p, prep, err := installAndConfigure(ctx, o.io, &o.flags, program)
	if err != nil {
		return err
	}
	cfgPath := prep.CLIConfig
	printInstalled(o.io.ErrOut, prep.InstallResult)
	if err := ctx.Err(); err != nil {
		return err // interrupted while installing: tofu is not started
	}
	if o.Exec {
		if err := p.ExecInit(programPath, cfgPath, o.Args); !errors.Is(err, loader.ErrNoExec) {
			return err
		}
	}
	code, err := p.RunInit(ctx, programPath, cfgPath, o.Args, o.io.streams())
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitCodeError{code: code, msg: fmt.Sprintf("%s init failed (exit %d)", filepath.Base(program), code)}
	}
	return nil
}
