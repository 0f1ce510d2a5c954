package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/artifactcopy"
	"github.com/oprov/oprov/pkg/oci"
)

type copyOptions struct {
	io          *IOStreams
	Src, Dst    string
	Constraint  string
	AllVersions bool
	Concurrency int
	registry    registryFlags
	output      outputFlag
}

func newCopyCmd(ios *IOStreams) *cobra.Command {
	o := &copyOptions{io: ios}
	c := &cobra.Command{
		Use:   "copy SRC[:VERSION] DST",
		Short: "Copy provider versions and modules between registries and layouts, with their signatures",
		Long: `Copy one version (SRC:VERSION), the versions meeting --version, or --all-versions from one
repository (or oci-layout:DIR) to another, together with everything that refers to them: oprov
and cosign signature bundles, SBOMs, SHA256SUMS provenance, and cosign's legacy sha256-<hex>.sig
tags, which plain referrer-aware copies drop. Content already there is not sent again, so a
copy cut short resumes where it stopped; each tag moves once its whole graph is there.`,
		Example: `  oprov copy registry.a/providers/acme/hello:1.0.0 registry.b/providers/acme/hello
  oprov copy registry.a/providers/acme/hello oci-layout:./hello --all-versions`,
		Args: argsRange(2, 2, "a source and a destination"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Src, o.Dst = args[0], args[1]
			return runCopy(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Constraint, "version", "", "copy the versions meeting this constraint")
	c.Flags().BoolVar(&o.AllVersions, "all-versions", false, "copy every version")
	concurrencyFlag(c, &o.Concurrency, "blobs to copy at once")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runCopy(ctx context.Context, o *copyOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	src, err := parseRef(o.Src)
	if err != nil {
		return err
	}
	dst, err := parseRef(o.Dst)
	if err != nil {
		return err
	}
	n := 0
	for _, b := range []bool{src.Reference != "", o.Constraint != "", o.AllVersions} {
		if b {
			n++
		}
	}
	if n != 1 {
		return usageErrorf("copy: name one version (SRC:VERSION), or give --version CONSTRAINT or --all-versions")
	}
	if dst.Reference != "" {
		return usageErrorf("copy: the destination is a repository; the versions keep their tags")
	}
	st, err := o.io.Factory.registry(o.registry).Open(ctx, src.WithReference(""), false)
	if err != nil {
		return oci.Explain("copy", src, err)
	}
	dt, err := o.io.Factory.registry(o.registry).Open(ctx, dst, true)
	if err != nil {
		return oci.Explain("copy", dst, err)
	}
	tags, err := artifactcopy.SelectTags(ctx, st, src.Reference, o.Constraint, o.AllVersions, o.io.Factory.Limits)
	if err != nil {
		return oci.Explain("copy", src, err)
	}
	bar := newProgress(o.io, "copying")
	res, err := artifactcopy.Copy(ctx, st, dt, tags, artifactcopy.Options{Concurrency: o.Concurrency, Progress: bar, Limits: o.io.Factory.Limits})
	bar.Finish()
	if err != nil {
		return oci.Explain("copy", src, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, res)
	}
	fmt.Fprintf(o.io.Out, "Copied %s from %s to %s: %d uploaded (%s), %d already there\n",
		strings.Join(res.Tags, ", "), src.Repo(), dst.Repo(), res.Uploaded, humanBytes(res.Bytes), res.Skipped)
	return nil
}
