package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
)

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
		Short: "Pin managed providers in .terraform.lock.hcl, and remote modules in .terraform.modules.lock.hcl",
		Long: `Resolve each managed provider's version constraints against its repository's tags, pick the
highest match (or keep the locked version while it still matches), verify its signature when
the oci_mirror block has a policy, and write its .terraform.lock.hcl entry: version,
constraints, and zh: and h1: hashes for every platform in the index (or the --platform list).
Entries for providers oprov does not manage are left byte for byte.

Every module call is resolved too, recursively: registry modules (Module Registry Protocol),
git sources to a commit, HTTP archives, oci:// modules to a digest (their signatures verified
under the oci_mirror blocks' trust policies). Each is recorded in .terraform.modules.lock.hcl
with its source, version (or commit, or digest), constraints, and h1:/zh: hashes; the
required_providers of remote modules count among the providers to lock. A module whose bytes
changed for its locked version is refused; a changed constraint or ref needs --upgrade.

` + loaderHelp,
		Example: `  oprov lock
  oprov lock --upgrade -o json
  oprov lock --platform linux_amd64 --platform darwin_arm64`,
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error { return runLock(c.Context(), o) },
	}
	c.Flags().StringSliceVar(&o.Platforms, "platform", nil, "platforms to lock, OS_ARCH (repeatable; default every platform published)")
	c.Flags().BoolVar(&o.Upgrade, "upgrade", false, "pick the newest allowed version even where the lock pins another")
	o.flags.register(c)
	o.output.register(c)
	return c
}

func runLock(ctx context.Context, o *lockOptions) error {
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
	defer opts.Cache.Close()
	opts.Platforms, opts.Upgrade = platforms, o.Upgrade
	bar := newProgress(o.io, "locking")
	opts.Progress = bar
	changes, err := p.LockAll(ctx, opts)
	bar.Finish()
	if err != nil {
		return err
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Lock       string                `json:"lock_file"`
			Providers  []loader.LockChange   `json:"providers"`
			ModuleLock string                `json:"module_lock_file,omitempty"`
			Modules    []loader.ModuleChange `json:"modules,omitempty"`
		}{p.Lock.Path, changes, moduleLockPath(p), p.LockedModules})
	}
	for _, m := range p.LockedModules {
		fmt.Fprintf(o.io.Out, "Locked module %s: %s%s, %s %s\n", m.Call, m.Source, moduleVersionNote(m), m.H1, m.ZH)
	}
	for _, ch := range changes {
		was := ""
		if ch.Previous != "" {
			was = fmt.Sprintf(" (was %s)", ch.Previous)
		}
		fmt.Fprintf(o.io.Out, "Locked %s %s%s: %s, %d hashes\n", ch.Addr, ch.Version, was, plural(ch.Platforms, "platform"), ch.Hashes)
	}
	fmt.Fprintf(o.io.Out, "Wrote %s\n", p.Lock.Path)
	if path := moduleLockPath(p); path != "" {
		fmt.Fprintf(o.io.Out, "Wrote %s\n", path)
	}
	return nil
}

// moduleLockPath is the module lock's path when the configuration has remote modules.
func moduleLockPath(p *loader.Project) string {
	if len(p.LockedModules) == 0 {
		return ""
	}
	return p.Modules.Path
}
