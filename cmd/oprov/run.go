package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
)

type runOptions struct {
	io      *IOStreams
	flags   loaderFlags
	Verbose bool
	Command []string
}

func newRunCmd(ios *IOStreams) *cobra.Command {
	o := &runOptions{io: ios}
	c := &cobra.Command{
		Use:   "run [--] COMMAND [ARGS...]",
		Short: "Launch the configuration's providers and run tofu (or terraform) with them",
		Long: `In a directory with oprov.hcl: install the managed providers as 'oprov install' does, build the
providers kept as source (cached by a hash of their source tree), launch each one over its
plugin protocol, and run COMMAND with TF_REATTACH_PROVIDERS handing them to it. SIGINT and
SIGTERM are passed on to COMMAND; when it ends every provider is stopped and its socket
removed, and oprov exits with COMMAND's exit code.

Providers kept as source are declared in oprov.hcl:

    provider "example.com/acme/internal" {
      source = "./providers/internal"
    }

The source directory is a Go module, a stdio provider (oprov-provider.json: any language) or a
Python project (pyproject.toml).

Nothing is published and nothing is installed: edit the source, run again.`,
		Example: `  oprov run -- tofu init
  oprov run -- tofu apply -auto-approve
  oprov run -- terraform plan -detailed-exitcode`,
		Args: argsRange(1, -1, "a command to run: oprov run -- tofu apply"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Command = args
			return runRun(c.Context(), o)
		},
	}
	c.Flags().SetInterspersed(false)
	c.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "say what is launched, and forward the providers' own log lines to stderr (go-plugin's own too with OPROV_DEBUG_PLUGIN=1)")
	o.flags.register(c)
	return c
}

func runRun(ctx context.Context, o *runOptions) error {
	if err := checkDir("-C", o.flags.Dir, configDirPurpose); err != nil {
		return err
	}
	name := o.Command[0]
	if name == "tofu" { // as init runs it: OPROV_TOFU names another program
		name = tofuProgram()
	}
	program, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("run: cannot run %q: %v (%s)", name, errors.Unwrap(err), programAdvice(name))
	}
	p, opts, err := o.flags.open(o.io)
	if err != nil {
		return err
	}
	defer opts.Cache.Close()
	code, err := p.Run(ctx, opts, loader.RunOptions{Program: program, Args: o.Command[1:], Streams: o.io.streams(), Verbose: o.Verbose})
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitCodeError{code: code, quiet: true}
	}
	return nil
}
