package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/release"
)

// loaderFlags are shared by the commands that work on a configuration directory.
type loaderFlags struct {
	Dir      string
	CacheDir string
	registry registryFlags
}

func (f *loaderFlags) register(c *cobra.Command) {
	c.Flags().StringVarP(&f.Dir, "chdir", "C", ".", "the configuration directory (where oprov.hcl and the .tf files are)")
	c.Flags().StringVar(&f.CacheDir, "cache-dir", "", "the cache (default $OPROV_CACHE_DIR, else $XDG_CACHE_HOME/oprov)")
	f.registry.register(c)
}

func (f *loaderFlags) open(ios *IOStreams) (*loader.Project, loader.Options, error) {
	p, err := loader.Open(f.Dir)
	if err != nil {
		return nil, loader.Options{}, err
	}
	dir := f.CacheDir
	if dir == "" {
		if dir, err = loader.DefaultCacheDir(); err != nil {
			return nil, loader.Options{}, err
		}
	}
	cache, err := loader.OpenCache(dir)
	if err != nil {
		return nil, loader.Options{}, err
	}
	return p, loader.Options{Cache: cache, Registry: f.registry.options(), Log: ios.ErrOut}, nil
}

const loaderHelp = `oprov.hcl sits beside the .tf files and uses the vocabulary of OpenTofu's CLI configuration:

    oci_mirror {
      repository_template = "registry.example.com/providers/${namespace}/${type}"
      include             = ["example.com/acme/*"]
      exclude             = ["example.com/acme/legacy"]   # optional
      policy              = "oprov-policy.hcl"            # optional: verify signatures
      # or: public_keys   = ["keys/acme.pub"]
    }

Several blocks are allowed; the first that selects a provider manages it. Which providers are
needed, and at what versions, comes from the configuration's own required_providers (the root
module and local module calls).`

type lockOptions struct {
	io        *IOStreams
	flags     loaderFlags
	Platforms []string
	Upgrade   bool
	output    outputFlag
}

func newLockCmd(ios *IOStreams) *cobra.Command {
	o := &lockOptions{io: ios}
	c := &cobra.Command{
		Use:   "lock [--platform OS_ARCH]...",
		Short: "Pin managed providers in .terraform.lock.hcl with hashes for every platform",
		Long: `Resolve each managed provider's version constraints against its repository's tags, pick the
highest match (or keep the locked version while it still matches), verify its signature when
the oci_mirror block has a policy, and write its .terraform.lock.hcl entry: version,
constraints, and zh: and h1: hashes for every platform in the index (or the --platform list).
Entries for providers oprov does not manage are left byte for byte.

` + loaderHelp,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runLock(c, o) },
	}
	c.Flags().StringSliceVar(&o.Platforms, "platform", nil, "platforms to lock, OS_ARCH (repeatable; default every platform published)")
	c.Flags().BoolVar(&o.Upgrade, "upgrade", false, "pick the newest allowed version even where the lock pins another")
	o.flags.register(c)
	o.output.register(c, true)
	return c
}

func runLock(c *cobra.Command, o *lockOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	platforms, err := parsePlatforms(o.Platforms)
	if err != nil {
		return err
	}
	p, opts, err := o.flags.open(o.io)
	if err != nil {
		return err
	}
	opts.Platforms, opts.Upgrade = platforms, o.Upgrade
	bar := newProgress(o.io, "locking")
	opts.Progress = bar
	changes, err := p.LockAll(c.Context(), opts)
	bar.Finish()
	if err != nil {
		return err
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Lock      string              `json:"lock_file"`
			Providers []loader.LockChange `json:"providers"`
		}{p.Lock.Path, changes})
	}
	for _, ch := range changes {
		was := ""
		if ch.Previous != "" {
			was = fmt.Sprintf(" (was %s)", ch.Previous)
		}
		fmt.Fprintf(o.io.Out, "Locked %s %s%s: %s, %d hashes\n", ch.Addr, ch.Version, was, plural(ch.Platforms, "platform"), ch.Hashes)
	}
	fmt.Fprintf(o.io.Out, "Wrote %s\n", p.Lock.Path)
	return nil
}

type installOptions struct {
	io     *IOStreams
	flags  loaderFlags
	output outputFlag
	// Program is what `oprov init` runs (OPROV_TOFU, default tofu); Args follow "init".
	Program string
	Args    []string
	runInit bool
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
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runInstall(c, o) },
	}
	o.flags.register(c)
	o.output.register(c, true)
	return c
}

func newInitCmd(ios *IOStreams) *cobra.Command {
	o := &installOptions{io: ios, runInit: true}
	c := &cobra.Command{
		Use:   "init [-- INIT-ARGS...]",
		Short: "Install the managed providers, then run tofu init with them",
		Long: `Run 'oprov install', then 'tofu init' with the CLI configuration it wrote
(TF_CLI_CONFIG_FILE), passing any arguments after --. Set OPROV_TOFU to run another program,
such as terraform. Your own CLI configuration's settings are kept where that is safe; oprov says
what it could not keep. Afterwards plain 'tofu plan' and 'tofu apply' work as usual.

` + loaderHelp,
		Example: `  oprov init
  OPROV_TOFU=terraform oprov init -- -upgrade`,
		RunE: func(c *cobra.Command, args []string) error {
			o.Args = args
			return runInstall(c, o)
		},
	}
	o.flags.register(c)
	return c
}

// CLIConfigPath is where install writes the CLI configuration, relative to the configuration.
var CLIConfigPath = filepath.Join(".terraform", "oprov", "cli.tfrc")

func runInstall(c *cobra.Command, o *installOptions) error {
	if err := o.output.check(); err != nil && !o.runInit {
		return err
	}
	program := os.Getenv("OPROV_TOFU")
	if program == "" {
		program = "tofu"
	}
	var programPath string
	if o.runInit {
		var err error
		if programPath, err = exec.LookPath(program); err != nil {
			return fmt.Errorf("init: cannot run %q: %v (install OpenTofu, or set OPROV_TOFU to the program to run)", program, errors.Unwrap(err))
		}
	}
	p, opts, err := o.flags.open(o.io)
	if err != nil {
		return err
	}
	bar := newProgress(o.io, "installing")
	opts.Progress = bar
	res, err := p.Install(c.Context(), opts)
	bar.Finish()
	if err != nil {
		return err
	}
	userCfg := loader.UserCLIConfig(program)
	cfgPath := filepath.Join(p.Dir, CLIConfigPath)
	if abs, err := filepath.Abs(userCfg); err == nil && userCfg != "" {
		if mine, _ := filepath.Abs(cfgPath); abs == mine {
			userCfg = "" // TF_CLI_CONFIG_FILE points at oprov's own file from an earlier run
		}
	}
	text, notes, err := loader.CLIConfig(res.Installed, userCfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(cfgPath), 0o755); err != nil {
		return err
	}
	if err := release.WriteFileAtomic(cfgPath, func(w io.Writer) error { _, err := io.WriteString(w, text); return err }); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(o.io.ErrOut, "oprov: note: %s\n", n)
	}
	if !o.runInit {
		if o.output.JSON() {
			return writeJSON(o.io.Out, struct {
				*loader.InstallResult
				CLIConfig string `json:"cli_config"`
			}{res, cfgPath})
		}
		printInstalled(o.io.Out, res)
		fmt.Fprintf(o.io.Out, "CLI configuration: %s\nRun: TF_CLI_CONFIG_FILE=%s tofu init\n", cfgPath, cfgPath)
		return nil
	}
	printInstalled(o.io.ErrOut, res)
	abs, _ := filepath.Abs(cfgPath)
	cmd := exec.CommandContext(c.Context(), programPath, append([]string{"init"}, o.Args...)...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+abs)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.io.In, o.io.Out, o.io.ErrOut
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return &exitCodeError{code: ee.ExitCode(), msg: fmt.Sprintf("%s init failed (exit %d)", filepath.Base(program), ee.ExitCode())}
		}
		return fmt.Errorf("running %s init: %w", program, err)
	}
	return nil
}

func printInstalled(w io.Writer, res *loader.InstallResult) {
	for _, in := range res.Installed {
		from := "fetched"
		if in.FromCache {
			from = "from cache"
		}
		fmt.Fprintf(w, "Installed %s %s (%s, %s)\n", in.Addr, in.Version, in.Platform, from)
	}
	if len(res.Unmanaged) > 0 {
		fmt.Fprintf(w, "Left to tofu: %s\n", strings.Join(res.Unmanaged, ", "))
	}
	if len(res.Sources) > 0 {
		fmt.Fprintf(w, "Kept as source, so not installed: %s (run tofu through 'oprov run', which builds and launches them)\n", strings.Join(res.Sources, ", "))
	}
}

func newTofurcCmd(ios *IOStreams) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "tofurc",
		Short: "Print the oci_mirror CLI configuration of oprov.hcl, for OpenTofu >= 1.10",
		Long: `Print a CLI configuration with oprov.hcl's oci_mirror blocks, for OpenTofu >= 1.10 users who want
OpenTofu to install from the registries itself (without oprov's signature checks and cache).`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := loader.LoadConfig(dir)
			if err != nil {
				return err
			}
			_, err = io.WriteString(ios.Out, cfg.MirrorCLIConfig())
			return err
		},
	}
	c.Flags().StringVarP(&dir, "chdir", "C", ".", "the configuration directory")
	return c
}
