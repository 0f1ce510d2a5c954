package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/stdiohost"
)

func newProviderCmd(ios *IOStreams) *cobra.Command {
	c := &cobra.Command{
		Use:     "provider",
		Short:   "Work on a stdio provider without tofu, or host providers for another machine",
		Example: `  oprov provider check ./kv steps.json`,
		Args:    argsRange(0, 0, "a subcommand"),
		RunE:    func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	// The parent shows help whatever -o says; every command takes -o alike.
	var parent outputFlag
	parent.register(c)
	c.AddCommand(newProviderCheckCmd(ios), newProviderHostCmd(ios))
	return c
}

type providerCheckOptions struct {
	io     *IOStreams
	Dir    string
	Steps  string
	output outputFlag
}

func newProviderCheckCmd(ios *IOStreams) *cobra.Command {
	o := &providerCheckOptions{io: ios}
	c := &cobra.Command{
		Use:   "check DIR STEPS",
		Short: "Run a stdio provider through its lifecycle from a file of steps",
		Long: `Run the stdio provider in DIR through oprov's host as tofu would drive it (configure, plan
and apply, import, read, data sources, function calls), from a JSON file of steps, and check
each result. One line per step; the exit status is 1 at the first step that fails.

    {"config": {"path": "/tmp/kv.json"},
     "steps": [
       {"apply": "kv_entry.a", "config": {"key": "a", "value": "1"}, "expect": {"revision": 1}},
       {"apply": "kv_entry.a", "config": {"key": "b", "value": "1"}, "expect_replace": true},
       {"import": "kv_entry.c", "id": "b", "expect": {"value": "1"}},
       {"data": "kv_keys", "config": {}, "expect": {"keys": ["b"]}},
       {"call": "entry_id", "args": ["b"], "expect": "kv:b"},
       {"destroy": "kv_entry.a"},
       {"apply": "kv_entry.d", "config": {"key": "b", "value": "x"}, "expect_error": "exists"}]}

"expect" holds what the state (or a function's result) must contain; docs/stdio-protocol.md
describes the protocol.`,
		Example: `  oprov provider check ./examples/stdio-python ./examples/stdio-python/steps.json`,
		Args:    argsRange(2, 2, "DIR and STEPS"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Dir, o.Steps = args[0], args[1]
			return runProviderCheck(c.Context(), o)
		},
	}
	o.output.register(c)
	return c
}

func runProviderCheck(ctx context.Context, o *providerCheckOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	b, err := os.ReadFile(o.Steps)
	if err != nil {
		return fmt.Errorf("reading the steps: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // numbers reach the provider exactly as written
	d.DisallowUnknownFields()
	var steps stdiohost.Steps
	if err := d.Decode(&steps); err != nil {
		return fmt.Errorf("%s: %w (see 'oprov provider check --help' for the format)", o.Steps, err)
	}
	var results []stdiohost.StepResult
	err = stdiohost.Check(ctx, o.Dir, &steps, func(r stdiohost.StepResult) {
		results = append(results, r)
		if !o.output.JSON() {
			if r.OK {
				fmt.Fprintf(o.io.Out, "ok   %d %s\n", r.Step, r.What)
			} else {
				fmt.Fprintf(o.io.Out, "FAIL %d %s: %s\n", r.Step, r.What, r.Error)
			}
		}
	})
	if o.output.JSON() {
		if werr := writeJSON(o.io.Out, results); werr != nil {
			return werr
		}
	}
	if err != nil {
		return answered(o.output, fmt.Errorf("provider check %s: %w", o.Dir, err))
	}
	return nil
}
