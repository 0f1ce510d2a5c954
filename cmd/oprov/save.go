package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/bundle"
	"github.com/oprov/oprov/pkg/ocicopy"
)

type saveOptions struct {
	io       *IOStreams
	Refs     []string
	Out      string
	registry registryFlags
	output   outputFlag
}

func newSaveCmd(ios *IOStreams) *cobra.Command {
	o := &saveOptions{io: ios}
	c := &cobra.Command{
		Use:   "save REF... --to FILE.tar",
		Short: "Write provider versions, with their signatures, into one OCI-layout tarball",
		Long: `Write the named versions (REPO:VERSION, or REPO for every version) with their referrers and
cosign signatures into one OCI image-layout tarball, to carry across an air gap. Inside it each
tag is named REPOSITORY:TAG, so 'oprov load' recreates the repositories under another registry.`,
		Example: `  oprov save registry.example.com/providers/acme/hello:1.0.0 --to providers.tar
  oprov save registry.example.com/providers/acme/hello mirror.internal/providers/hashicorp/random --to providers.tar -o json`,
		Args: argsRange(1, -1, "one or more references"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Refs = args
			return runSave(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Out, "to", "", "the tarball to write (required)")
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
	var items []bundle.SaveItem
	for _, s := range o.Refs {
		ref, err := parseRef(s)
		if err != nil {
			return err
		}
		it, err := bundle.SaveItemFor(ctx, ref, o.registry.options())
		if err != nil {
			return err
		}
		items = append(items, it)
	}
	bar := newProgress(o.io, "saving")
	res, err := bundle.Save(ctx, items, o.Out, ocicopy.Options{Progress: bar})
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
