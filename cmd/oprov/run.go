package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/recording"
)

type runOptions struct {
	io    *IOStreams
	flags loaderFlags
	// Verbose is -v's count: 1 oprov's and the providers' own lines, 2 also their SDK's and go-plugin's.
	Verbose    int
	Record     string
	KeepConfig bool
	KeepFuncs  bool
	Replay     string
	Ignore     []string
	Command    []string
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
removed, and oprov exits with COMMAND's exit code. oprov's own failures exit 125 (126: COMMAND
cannot be run, 127: not found), codes tofu never uses: see 'oprov help exit-codes'.

Providers kept as source are declared in oprov.hcl:

    provider "example.com/acme/internal" {
      source = "./providers/internal"
    }

The source directory is a Go module, a stdio provider (oprov-provider.json: any language) or a
Python project (pyproject.toml).

Nothing is published and nothing is installed: edit the source, run again.

A remote block in oprov.hcl runs a provider on another machine (ssh, kubectl exec -i, docker
exec -i) whose network and credentials it needs, while tofu runs here: 'oprov help remote'.

With --record FILE, every provider call is written to FILE: request and response, values
decoded with the provider's schema, secrets redacted (` + docPage + `recording-format.md; 'oprov help replay'). With
--replay FILE, every call is answered from such a file: no provider is installed or
started, and nothing reaches the network. A call the recording does not hold fails with
a diagnostic saying how it differs from the nearest recorded one.`,
		Example: `  oprov run -- tofu init
  oprov run -- tofu apply -auto-approve
  oprov run -- terraform plan -detailed-exitcode
  oprov run --record calls.jsonl -- tofu apply -auto-approve
  oprov run --replay calls.jsonl -- tofu plan -detailed-exitcode`,
		Args: argsRange(1, -1, "a command to run: oprov run -- tofu apply"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Command = args
			return runRun(c.Context(), o)
		},
	}
	c.Flags().SetInterspersed(false)
	c.Flags().CountVarP(&o.Verbose, "verbose", "v", "say what is launched, and forward the providers' own log lines to stderr; -vv adds their SDK's request logs and go-plugin's own lines (as OPROV_DEBUG_PLUGIN=1)")
	c.Flags().StringVar(&o.Record, "record", "", "record every provider call to this file (line-oriented JSON; secrets redacted)")
	c.Flags().BoolVar(&o.KeepConfig, "record-provider-config", false, "keep the provider configurations' values in the recording (they are redacted otherwise)")
	c.Flags().BoolVar(&o.KeepFuncs, "record-function-results", false, "keep what provider functions return in the recording (redacted otherwise, since a result may be a secret passed in; replay answers a function call only from a recording that kept them)")
	c.Flags().StringVar(&o.Replay, "replay", "", "answer every provider call from this recording: no provider runs")
	c.Flags().StringArrayVar(&o.Ignore, "replay-ignore", nil, "leave TYPE.ATTRIBUTE out when comparing calls with the recording (TYPE may be *); repeatable")
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
		return lookPathError(err, fmt.Errorf("run: cannot run %q: %v (%s)", name, errors.Unwrap(err), programAdvice(name)))
	}
	if o.Record != "" && o.Replay != "" {
		return usageErrorf("run: --record and --replay cannot be used together: record with real providers, then replay")
	}
	if len(o.Ignore) > 0 && o.Replay == "" {
		return usageErrorf("run: --replay-ignore needs --replay")
	}
	if o.Replay != "" {
		if err := checkFile("--replay", o.Replay, "give the file 'oprov run --record FILE' wrote"); err != nil {
			return err
		}
	}
	var ignore []recording.Ignore
	for _, s := range o.Ignore {
		ig, err := recording.ParseIgnore(s)
		if err != nil {
			return usageErrorf("run: --replay-ignore %w", err)
		}
		ignore = append(ignore, ig)
	}
	ro := loader.RunOptions{Program: program, Args: o.Command[1:], Streams: o.io.streams(), Verbose: o.Verbose > 0, Debug: o.Verbose > 1,
		Record: o.Record, KeepConfig: o.KeepConfig, KeepFunctionResults: o.KeepFuncs, Replay: o.Replay, Ignore: ignore,
		RecordingLimits: o.io.Factory.RecordingLimits}
	code, err := o.run(ctx, ro)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitCodeError{code: code, quiet: true}
	}
	return nil
}

// run runs the command; a replay opens no cache and no registry: it needs nothing but the
// recording.
func (o *runOptions) run(ctx context.Context, ro loader.RunOptions) (int, error) {
	if o.Replay != "" {
		if err := checkDir("-C", o.flags.Dir, configDirPurpose); err != nil {
			return 0, err
		}
		p, err := loader.Open(o.flags.Dir)
		if err != nil {
			return 0, err
		}
		return p.Run(ctx, loader.Options{}, ro)
	}
	p, opts, err := o.flags.open(o.io)
	if err != nil {
		return 0, err
	}
	defer opts.Cache.Close()
	return p.Run(ctx, opts, ro)
}
