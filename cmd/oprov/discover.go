package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
)

type discoverOptions struct {
	io       *IOStreams
	Ref      string
	Depth    int
	registry registryFlags
	output   outputFlag
}

func newDiscoverCmd(ios *IOStreams) *cobra.Command {
	o := &discoverOptions{io: ios}
	c := &cobra.Command{
		Use:   "discover REPO:VERSION",
		Short: "List what refers to a provider version: signatures, SBOMs, provenance",
		Long: `List the OCI referrers of a provider version (signature bundles, SBOMs, SHA256SUMS provenance
from 'oprov mirror', files added with 'oprov attach'), following referrers of referrers down to
--depth levels, and cosign's sha256-<hex>.sig tag when there is one.`,
		Example: `  oprov discover registry.example.com/providers/acme/hello:1.0.0
  oprov discover registry.example.com/providers/acme/hello:1.0.0 --depth 1 -o json`,
		Args: argsRange(1, 1, "one reference: REPO:VERSION"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Ref = args[0]
			return runDiscover(c.Context(), o)
		},
	}
	c.Flags().IntVar(&o.Depth, "depth", 2, "how many levels of referrers to follow")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runDiscover(ctx context.Context, o *discoverOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	ref, err := parseVersionRef("discover", o.Ref)
	if err != nil {
		return err
	}
	t, err := o.io.Factory.registry(o.registry).Open(ctx, ref, false)
	if err != nil {
		return oci.Explain("discover", ref, err)
	}
	subject, err := t.Resolve(ctx, ref.Reference)
	if err != nil {
		return oci.Explain("discover", ref, err)
	}
	refs, err := referrers.Discover(ctx, t, subject, o.Depth)
	if err != nil {
		return oci.Explain("discover", ref, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Subject   string               `json:"subject"`
			Referrers []referrers.Referrer `json:"referrers"`
		}{subject.Digest.String(), append([]referrers.Referrer{}, refs...)})
	}
	fmt.Fprintf(o.io.Out, "%s (%s)\n", ref, subject.Digest)
	var show func([]referrers.Referrer, string)
	show = func(rs []referrers.Referrer, indent string) {
		for _, r := range rs {
			where := ""
			if r.Tag != "" {
				where = " tag " + r.Tag
			}
			fmt.Fprintf(o.io.Out, "%s└ %s %s%s", indent, r.ArtifactType, r.Digest, where)
			if len(r.Files) > 0 {
				fmt.Fprintf(o.io.Out, " [%s]", strings.Join(r.Files, ", "))
			}
			fmt.Fprintln(o.io.Out)
			show(r.Referrers, indent+"  ")
		}
	}
	show(refs, "  ")
	return nil
}
