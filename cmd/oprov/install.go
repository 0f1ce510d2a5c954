package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/cache"
)

type installOptions struct {
	io     *IOStreams
	flags  loaderFlags
	output outputFlag
}

func newInstallCmd(ios *IOStreams) *cobra.Command {
	o := &installOptions{io: ios}
	c := &cobra.Command{
		Use:   "install",
		Short: "Verify, cache and unpack the managed providers, and write a CLI config for tofu",
		Long: `Prepare the providers oprov.hcl manages, without running anything else: lock them first where
the lock file lacks them, verify signatures per the policy, fetch this machine's zip into the
shared cache (OPROV_CACHE_DIR), check it against the lock, unpack it safely into the cache's
filesystem mirror, and write .terraform/oprov/cli.tfrc: filesystem_mirror for these providers,
your own settings (or direct) for the rest. With a warm cache and a lock file, no network
request is made.

` + loaderHelp,
		Example: `  oprov install
  oprov install -C ./infra -o json
  TF_CLI_CONFIG_FILE=.terraform/oprov/cli.tfrc tofu init`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runInstall(c.Context(), o) },
	}
	o.flags.register(c)
	o.output.register(c)
	return c
}

func runInstall(ctx context.Context, o *installOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	_, prep, err := installAndConfigure(ctx, o.io, &o.flags, tofuProgram())
	if err != nil {
		return err
	}
	res, cfgPath := prep.InstallResult, prep.CLIConfig
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			*loader.InstallResult
			CLIConfig string `json:"cli_config"`
		}{res, cfgPath})
	}
	printInstalled(o.io.Out, res)
	fmt.Fprintf(o.io.Out, "CLI configuration: %s\nRun: %s\n", cfgPath, initCommand(o.flags.Dir, cfgPath, tofuProgram()))
	return nil
}

// initCommand is the command line, to paste into a shell in the current directory, that runs
// program's init in dir with the CLI configuration oprov wrote: the configuration's path made
// absolute (so -chdir cannot change what it names) and dir given with -chdir.
func initCommand(dir, cfgPath, program string) string {
	if abs, err := filepath.Abs(cfgPath); err == nil {
		cfgPath = abs
	}
	line := "TF_CLI_CONFIG_FILE=" + shellWord(cfgPath) + " " + shellWord(program)
	if filepath.Clean(dir) != "." {
		line += " -chdir=" + shellWord(dir)
	}
	return line + " init"
}

// shellWord quotes s for a POSIX shell when it holds anything but plain path characters.
func shellWord(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:=@", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// installAndConfigure prepares the configuration's providers for program (with progress), and
// prints the notes on what of the user's own could not be kept.
func installAndConfigure(ctx context.Context, ios *IOStreams, flags *loaderFlags, program string) (*loader.Project, *loader.Prepared, error) {
	p, opts, err := flags.open(ios)
	if err != nil {
		return nil, nil, err
	}
	defer opts.Cache.Close()
	bar := newProgress(ios, "installing")
	opts.Progress = bar
	prep, err := p.Prepare(ctx, opts, program)
	bar.Finish()
	if err != nil {
		return nil, nil, err
	}
	for _, n := range prep.Notes {
		fmt.Fprintf(ios.ErrOut, "oprov: note: %s\n", n)
	}
	return p, prep, nil
}

func printInstalled(w io.Writer, res *loader.InstallResult) {
	for _, in := range res.Installed {
		from := "fetched"
		if in.FromCache {
			from = "from cache"
		}
		fmt.Fprintf(w, "Installed %s %s (%s, %s%s)\n", in.Addr, in.Version, in.Platform, from, authNote(in.Auth))
	}
	for _, m := range res.Modules {
		fmt.Fprintf(w, "Installed module %s from %s%s into %s (%s)\n", m.Call, m.Source, moduleVersionNote(m), m.Dir, m.H1)
	}
	if len(res.Unmanaged) > 0 {
		fmt.Fprintf(w, "Left to tofu: %s\n", strings.Join(res.Unmanaged, ", "))
	}
	if len(res.Sources) > 0 {
		fmt.Fprintf(w, "Kept as source, so not installed: %s (run tofu through 'oprov run', which builds and launches them)\n", strings.Join(res.Sources, ", "))
	}
}

// authNote says how a package was verified, for success messages.
func authNote(a cache.Authentication) string {
	switch {
	case a.Method == "cosign" && len(a.Keys) > 0:
		note := ", signature verified with " + strings.Join(a.Keys, ", ")
		if a.Rule != "" {
			note += " (trust rule " + a.Rule + ")"
		}
		return note
	case a.Warning != "":
		return ", NOT verified (policy mode warn)"
	default:
		return ", no signature required"
	}
}

// moduleVersionNote gives a module's version, commit or digest, and how it was verified.
func moduleVersionNote(m loader.ModuleChange) string {
	note := ""
	if m.Version != "" {
		note = " " + m.Version
	}
	if m.Previous != "" {
		note += " (was " + m.Previous + ")"
	}
	if m.Auth != "" {
		note += ", " + m.Auth
	}
	if m.FromInstalled {
		note += ", already installed and matching the module lock"
	}
	return note
}
