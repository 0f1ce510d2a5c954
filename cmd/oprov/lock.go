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
		Short: "Pin managed providers in .terraform.lock.hcl with hashes for every platform",
		Long: `Resolve each managed provider's version constraints against its repository's tags, pick the
highest match (or keep the locked version while it still matches), verify its signature when
the oci_mirror block has a policy, and write its .terraform.lock.hcl entry: version,
constraints, and zh: and h1: hashes for every platform in the index (or the --platform list).
Entries for providers oprov does not manage are left byte for byte.

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
