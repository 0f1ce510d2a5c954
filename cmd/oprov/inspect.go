package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

type inspectOptions struct {
	io       *IOStreams
	Ref      string
	registry registryFlags
	output   outputFlag
}

func newInspectCmd(ios *IOStreams) *cobra.Command {
	o := &inspectOptions{io: ios}
	c := &cobra.Command{
		Use:   "inspect REPO[:VERSION]",
		Short: "List a repository's versions, or one version's platforms (or a module's digests and hashes)",
		Long: `Without a version, list the repository's tags that are versions, highest first (other tags
are ignored, as OpenTofu ignores them). With a version, list its platforms with their manifest
and zip digests and sizes. A module package's version shows its manifest and zip digests, its
size, its h1: and zh: hashes and its annotations.`,
		Example: `  oprov inspect registry.example.com/providers/acme/hello
  oprov inspect registry.example.com/providers/acme/hello:1.0.0 -o json
  oprov inspect oci-layout:./layout:1.0.0`,
		Args: argsRange(1, 1, "one reference: REPO or REPO:VERSION"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Ref = args[0]
			return runInspect(c.Context(), o)
		},
	}
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runInspect(ctx context.Context, o *inspectOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	ref, err := parseRef(o.Ref)
	if err != nil {
		return err
	}
	target, err := o.io.Factory.registry(o.registry).Open(ctx, ref, false)
	if err != nil {
		return oci.Explain("inspect", ref, err)
	}
	if ref.Reference == "" {
		versions, err := artifact.ListVersions(ctx, target, o.io.Factory.Limits)
		if err != nil {
			return oci.Explain("inspect", ref, err)
		}
		return printVersions(o, ref, versions)
	}
	s, err := sign.Resolve(ctx, target, ref, o.io.Factory.Limits)
	if err != nil {
		return oci.Explain("inspect", ref, err)
	}
	switch s.Kind {
	case sign.KindModule:
		return runInspectModule(ctx, o, target, ref, s.Module)
	case sign.KindProvider:
		platforms, err := artifact.FetchPlatforms(ctx, target, s.Version)
		if err != nil {
			return oci.Explain("inspect", ref, err)
		}
		return printVersion(o, ref, s.Version, platforms)
	}
	return fmt.Errorf("inspect: %w (verify shows an image's signatures)", notProviderOrModule(ref, s))
}

// printVersions lists a repository's versions, highest first.
func printVersions(o *inspectOptions, ref oci.Ref, versions []manifest.TaggedVersion) error {
	type versionJSON struct {
		Version string `json:"version"`
		Tag     string `json:"tag"`
	}
	out := struct {
		Repository string        `json:"repository"`
		Versions   []versionJSON `json:"versions"`
	}{Repository: ref.String(), Versions: []versionJSON{}}
	for _, v := range versions {
		out.Versions = append(out.Versions, versionJSON{v.Version.String(), v.Tag})
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, out)
	}
	if len(versions) == 0 {
		fmt.Fprintf(o.io.Out, "%s has no version tags\n", ref)
	}
	for _, v := range out.Versions {
		fmt.Fprintln(o.io.Out, v.Version)
	}
	return nil
}

// printVersion shows one version's platforms with their digests and sizes.
func printVersion(o *inspectOptions, ref oci.Ref, v *artifact.Version, platforms []*artifact.Platform) error {
	out := struct {
		Reference   string         `json:"reference"`
		Version     string         `json:"version,omitempty"`
		IndexDigest string         `json:"index_digest"`
		Platforms   []platformJSON `json:"platforms"`
		Others      int            `json:"other_entries"`
	}{Reference: ref.String(), Version: v.Version, IndexDigest: v.Index.Digest.String(), Others: len(v.Parsed.Others)}
	for _, p := range platforms {
		e, _ := v.Parsed.Lookup(p.Platform)
		out.Platforms = append(out.Platforms, platformJSON{p.Platform.String(), p.Manifest.Digest.String(), p.Zip.Digest.String(), p.Zip.Size, p.Filename, e.H1})
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, out)
	}
	fmt.Fprintf(o.io.Out, "%s\nDigest: %s\n\n", ref, out.IndexDigest)
	fmt.Fprintf(o.io.Out, "%-14s %-10s %s\n", "PLATFORM", "SIZE", "ZIP DIGEST")
	for _, p := range out.Platforms {
		fmt.Fprintf(o.io.Out, "%-14s %-10s %s\n", p.Platform, humanBytes(p.Size), p.Zip)
	}
	return nil
}
