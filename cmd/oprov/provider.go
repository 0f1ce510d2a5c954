package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/recording"
	"github.com/oprov/oprov/pkg/stdiohost"
)

func newProviderCmd(ios *IOStreams) *cobra.Command {
	c := &cobra.Command{
		Use:   "provider",
		Short: "Drive a provider without tofu (a stdio provider's steps, or any provider from JSON lines), or host providers for another machine",
		Example: `  oprov provider check ./kv steps.json
  echo '{"call":"create","type":"hello_greeting","config":{"name":"a"}}' | oprov provider check --json ./hello`,
		Args: argsRange(0, 0, "a subcommand"),
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	// The parent shows help whatever -o says; every command takes -o alike.
	var parent outputFlag
	parent.register(c)
	c.AddCommand(newProviderCheckCmd(ios), newProviderHostCmd(ios))
	return c
}

type providerCheckOptions struct {
	io        *IOStreams
	Dir       string
	Steps     string
	JSON      bool
	Recording string
	target    schemaOptions
	output    outputFlag
}

func newProviderCheckCmd(ios *IOStreams) *cobra.Command {
	o := &providerCheckOptions{io: ios}
	c := &cobra.Command{
		Use:   "check DIR STEPS | check --json TARGET | check --json --recording FILE",
		Short: "Run a stdio provider through its lifecycle from a file of steps",
		Long:  providerCheckLong,
		Example: `  oprov provider check ./examples/stdio-python ./examples/stdio-python/steps.json
  oprov provider check --json registry.example.com/providers/acme/hello:1.0.0 < calls.jsonl
  oprov provider check --json --recording testdata/apply.jsonl --address example.com/acme/hello < calls.jsonl`,
		Args: o.args,
		RunE: func(c *cobra.Command, args []string) error {
			if o.JSON {
				if len(args) == 1 {
					o.target.Target = args[0]
				}
				return runProviderJSON(c.Context(), o)
			}
			o.Dir, o.Steps = args[0], args[1]
			return runProviderCheck(c.Context(), o)
		},
	}
	o.target.io = ios
	c.Flags().BoolVar(&o.JSON, "json", false, "drive the provider TARGET with JSON calls on stdin, one answer a line on stdout")
	c.Flags().StringVar(&o.Recording, "recording", "", "with --json: drive the recording FILE (oprov run --record) instead of a provider: it answers, and nothing runs")
	c.Flags().StringVar(&o.target.Address, "address", "", "with --json: the provider's source address (default: guessed from the name); with --recording, which of its providers")
	c.Flags().StringSliceVar(&o.target.Keys, "key", nil, "with --json: verify a repository version's signature with this public key (repeatable)")
	c.Flags().StringVar(&o.target.Policy, "policy", "", "with --json: verify a repository version's signature under this trust policy")
	c.Flags().StringVar(&o.target.CacheDir, "cache-dir", "", "with --json: the cache (default $OPROV_CACHE_DIR, else $XDG_CACHE_HOME/oprov)")
	o.target.registry.register(c)
	o.output.register(c)
	return c
}

// providerCheckLong is provider check's help.
var providerCheckLong = `Run the stdio provider in DIR through oprov's host as tofu would drive it (configure, plan
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

"expect" holds what the state (or a function's result) must contain; ` + docPage + `stdio-protocol.md
describes the protocol.

With --json, TARGET is any provider oprov launches: a reference REPO:VERSION, an executable, a
Go, Python or stdio source directory. A file given as TARGET is run as a provider; it is never
read as a recording. With --recording FILE instead of TARGET, the recording (oprov run --record)
answers and no provider runs: FILE is only read, and a file that does not begin with a
recording's header is refused, whatever its mode. A recording given as TARGET (it begins with
the header, or its name ends in .jsonl) is refused, naming --recording, and nothing runs.
--address picks one provider of a recording that holds several. A recording answers the calls
it holds: a create or plan replays when its configuration is the recorded one.

Calls are read from stdin, one JSON object a line, and each answer is written to stdout as one
line:

    {"call": "configure", "config": {"greeting": "Hi"}}
    {"call": "create", "type": "hello_greeting", "config": {"name": "a"}}
    {"call": "update", "type": "hello_greeting", "config": {"name": "a"}, "state": {...}}
    {"call": "read", "type": "hello_greeting", "state": {...}}
    {"call": "delete", "type": "hello_greeting", "state": {...}}
    {"call": "import", "type": "hello_greeting", "id": "greeting-a"}
    {"call": "plan", "type": "hello_greeting", "config": {...}, "state": {...}}
    {"call": "data", "type": "hello_greeting", "config": {"name": "b"}}
    {"call": "function", "type": "greet", "args": ["c"]}
    {"call": "schema"}

The provider configuration is checked against the schema first: a missing required attribute
is named. Nothing is written into the provider's directory; builds go to the cache.`

// args checks provider check's arguments: DIR and STEPS, or with --json one TARGET, or
// --recording FILE and none.
func (o *providerCheckOptions) args(c *cobra.Command, args []string) error {
	switch {
	case o.Recording != "" && !o.JSON:
		return usageErrorf("--recording needs --json: oprov provider check --json --recording FILE")
	case o.Recording != "" && len(args) > 0:
		return usageErrorf("give either a provider TARGET or --recording FILE, not both")
	case o.Recording != "":
		return nil
	case o.JSON:
		return argsRange(1, 1, "one provider: REPO:VERSION or a path (a recording goes with --recording FILE)")(c, args)
	}
	return argsRange(2, 2, "DIR and STEPS")(c, args)
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

// runProviderJSON drives one provider, or a recording's replay of it, from JSON lines on stdin.
func runProviderJSON(ctx context.Context, o *providerCheckOptions) error {
	d, stop, err := providerDriver(ctx, o)
	if err != nil {
		return err
	}
	defer stop()
	sc := bufio.NewScanner(o.io.In)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	failed := 0
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		a := d.Do(ctx, sc.Bytes())
		if !a.OK {
			failed++
		}
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if _, err := o.io.Out.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading calls from stdin: %w", err)
	}
	if failed > 0 {
		return &exitCodeError{code: 1, quiet: true}
	}
	return nil
}

// providerDriver launches the target, or reads the recording --recording names, and gives its
// driver. A positional TARGET is a provider: a file given there is run, never read as a
// recording, and a recording given there is refused, naming --recording.
func providerDriver(ctx context.Context, o *providerCheckOptions) (*recording.Driver, func(), error) {
	if o.Recording != "" {
		d, err := recording.OpenDriver(o.Recording, o.target.Address, o.io.Factory.RecordingLimits)
		var bad *recording.InputError
		if errors.As(err, &bad) {
			return nil, nil, &usageError{err: err}
		}
		return d, func() {}, err
	}
	if err := notARecording(o.target.Target); err != nil {
		return nil, nil, err
	}
	exe, _, err := schemaTarget(ctx, &o.target)
	if err != nil {
		return nil, nil, err
	}
	p, err := plugin.Start(ctx, plugin.Options{Path: exe})
	if err != nil {
		return nil, nil, err
	}
	stop := func() { p.Stop(context.Background()) }
	s, err := p.Schema(ctx)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("provider %s: %w", exe, err)
	}
	d, err := recording.NewDriver(p.Protocol, s, p.Invoke)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return d, stop, nil
}

// notARecording refuses a recording given as TARGET, where a provider to run goes: one that
// begins with a recording's header, or is named as recordings are (*.jsonl), so that a script
// written for the old form (a recording as TARGET) never runs what a pull request put in the
// recording's place. Nothing is read as a recording here: that takes --recording.
func notARecording(target string) error {
	switch recording.Sniff(target) {
	case recording.NotRecording:
		return nil
	case recording.RecordingFile:
		return usageErrorf("%s is a recording, and TARGET is a provider to run: give a recording as --recording %s (nothing was run)", target, target)
	case recording.RecordingName:
		return usageErrorf("%s is named as a recording (.jsonl), and TARGET is a provider to run: give a recording as --recording %s (nothing was run; a provider executable is not named .jsonl)", target, target)
	}
	return nil
}
