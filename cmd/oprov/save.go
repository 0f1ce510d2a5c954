package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/artifactcopy"
	"github.com/oprov/oprov/pkg/bundle"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/origin"
)

type saveOptions struct {
	io        *IOStreams
	Refs      []string
	Out       string
	Config    string
	Platforms []string
	Since     string
	GPGKeys   []string
	registry  registryFlags
	output    outputFlag
}

func newSaveCmd(ios *IOStreams) *cobra.Command {
	o := &saveOptions{io: ios}
	c := &cobra.Command{
		Use:   "save (REF... | --config DIR) --to FILE.tar",
		Short: "Write provider versions, with their signatures, into one OCI-layout tarball",
		Long: `Write the named versions (REPO:VERSION, or REPO for every version) with their referrers and
cosign signatures into one OCI image-layout tarball, to carry across an air gap. Inside it each
tag is named REPOSITORY:TAG, so 'oprov load' recreates the repositories under another registry.

With --config DIR, write every provider the configuration requires (the required_providers of
its root and of every module it calls, remote ones included), at the lock file's versions (the
highest that match where the lock has none), for the --platform given or else the platforms the
lock file records, and every remote module it calls (registry, git, HTTP, oci://) as OpenTofu's
module package, at the module lock's version, its hashes checked against that lock: providers
oprov.hcl maps to OCI repositories are copied from there with their signatures, verified under
its policy; every other one comes from its origin registry, its SHA256SUMS signature checked
and attached as mirror does. Everything is resolved and checked before anything is written. The
tarball holds a listing (oprov-bundle.json, also written beside it as FILE.tar.listing.json);
with --since an earlier bundle or its listing, only blobs it lacked are written.`,
		Example: `  oprov save registry.example.com/providers/acme/hello:1.0.0 --to providers.tar
  oprov save registry.example.com/providers/acme/hello mirror.internal/providers/hashicorp/random --to providers.tar -o json
  oprov save --config . --platform linux_amd64 --platform darwin_arm64 --to deps.tar
  oprov save --config . --since deps-2026-10.tar.listing.json --to deps-2026-11.tar`,
		Args: argsRange(0, -1, "references, or none with --config"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Refs = args
			return runSave(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Out, "to", "", "the tarball to write (required)")
	c.Flags().StringVar(&o.Config, "config", "", "bundle every provider this configuration directory requires")
	c.Flags().StringSliceVar(&o.Platforms, "platform", nil, "with --config: platforms to carry, OS_ARCH (repeatable; default: those the lock file records)")
	c.Flags().StringVar(&o.Since, "since", "", "with --config: an earlier bundle (or its .listing.json): write only blobs it lacked")
	c.Flags().StringSliceVar(&o.GPGKeys, "gpg-key", nil, "with --config: armored OpenPGP key to pin as the only allowed signer of origins' SHA256SUMS (repeatable)")
	o.registry.register(c)
	o.output.register(c)
	o.output.pathHint = "--to"
	return c
}

func runSave(ctx context.Context, o *saveOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if o.Out == "" {
		return usageErrorf("save: --to FILE.tar is required")
	}
	// Before anything is fetched: a tarball that cannot be written is known now.
	if err := checkDir("--to "+o.Out, filepath.Dir(o.Out), "create it, or write the tarball elsewhere"); err != nil {
		return err
	}
	if o.Config != "" {
		if len(o.Refs) > 0 {
			return usageErrorf("save: give references or --config, not both")
		}
		return runSaveConfig(ctx, o)
	}
	if len(o.Refs) == 0 {
		return usageErrorf("save: give one or more references, or --config DIR")
	}
	if len(o.Platforms) > 0 || o.Since != "" || len(o.GPGKeys) > 0 {
		return usageErrorf("save: --platform, --since and --gpg-key go with --config")
	}
	var items []bundle.SaveItem
	for _, s := range o.Refs {
		ref, err := parseRef(s)
		if err != nil {
			return err
		}
		it, err := bundle.SaveItemFor(ctx, ref, o.io.Factory.registry(o.registry))
		if err != nil {
			return err
		}
		items = append(items, it)
	}
	bar := newProgress(o.io, "saving")
	res, err := bundle.Save(ctx, items, o.Out, artifactcopy.Options{Progress: bar, Limits: o.io.Factory.Limits})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			File string   `json:"file"`
			Tags []string `json:"tags"`
		}{o.Out, res.Tags})
	}
	st, _ := os.Stat(o.Out)
	fmt.Fprintf(o.io.Out, "Saved %s to %s (%s)\n", strings.Join(res.Tags, ", "), o.Out, humanBytes(st.Size()))
	return nil
}

func runSaveConfig(ctx context.Context, o *saveOptions) error {
	if err := checkDir("--config", o.Config, "give the configuration directory"); err != nil {
		return err
	}
	platforms, err := parsePlatforms(o.Platforms)
	if err != nil {
		return err
	}
	pinned, err := origin.ReadKeyFiles(o.GPGKeys)
	if err != nil {
		return err
	}
	var base *bundle.Listing
	if o.Since != "" {
		if base, err = bundle.ReadListing(ctx, o.Since, o.io.Factory.Limits); err != nil {
			return fmt.Errorf("save: --since: %w", err)
		}
	}
	// Remote modules are resolved (checked against the module lock): the bundle carries them, and
	// the providers they require.
	wants, mods, err := loader.BundleWantsModules(ctx, o.Config, loader.Options{Registry: o.io.Factory.registry(o.registry), Log: o.io.ErrOut, ModuleLimits: o.io.Factory.ModuleLimits})
	if err != nil {
		return fmt.Errorf("save --config %s: %w (nothing was written)", o.Config, err)
	}
	modLock, err := module.ReadLock(o.Config)
	if err != nil {
		return fmt.Errorf("save --config %s: %w", o.Config, err)
	}
	c, err := o.io.Factory.openCache("")
	if err != nil {
		return err
	}
	bar := newProgress(o.io, "saving")
	l, err := bundle.SaveConfig(ctx, bundle.ConfigOptions{Cache: c,
		Dir: o.Config, Wants: wants, Platforms: platforms, Registry: o.io.Factory.registry(o.registry), TrustedKeys: pinned,
		Base: base, Progress: bar, Log: o.io.ErrOut, Modules: mods.Modules, ModuleLock: modLock,
	}, o.Out)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("save --config %s: %w", o.Config, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			File        string `json:"file"`
			ListingFile string `json:"listing_file"`
			*bundle.Listing
		}{o.Out, o.Out + ".listing.json", l})
	}
	for _, p := range l.Providers {
		state := ""
		if !p.InBundle {
			state = " (unchanged since the base: left out)"
		}
		fmt.Fprintf(o.io.Out, "%s %s [%s] from %s (%s), version: %s%s\n", p.Address, p.Version, strings.Join(p.Platforms, ", "), p.Source, p.Evidence, p.VersionFrom, state)
	}
	printSavedModules(o, l)
	st, _ := os.Stat(o.Out)
	written := len(l.Blobs) - len(l.Omitted) // Blobs holds the base's too
	fmt.Fprintf(o.io.Out, "Saved %s", plural(len(l.Providers), "provider"))
	if len(l.Modules) > 0 {
		fmt.Fprintf(o.io.Out, " and %s", plural(len(l.Modules), "module call"))
	}
	fmt.Fprintf(o.io.Out, " to %s (%s; %d blobs", o.Out, humanBytes(st.Size()), written)
	if base != nil {
		fmt.Fprintf(o.io.Out, "; the base's %d not repeated", len(l.Omitted))
	}
	fmt.Fprintf(o.io.Out, "); listing in %s.listing.json\n", o.Out)
	return nil
}
