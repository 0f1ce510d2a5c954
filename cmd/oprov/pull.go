package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
)

type pullOptions struct {
	io        *IOStreams
	Ref       string
	Platforms []string
	OutDir    string
	registry  registryFlags
	output    outputFlag
}

func newPullCmd(ios *IOStreams) *cobra.Command {
	o := &pullOptions{io: ios}
	c := &cobra.Command{
		Use:   "pull REPO:VERSION [--platform OS_ARCH]... [--out-dir DIR]",
		Short: "Download a provider version's release zips",
		Long: `Download a provider version's zips under their release names, with a SHA256SUMS file.
Every manifest and zip is checked against its digest; a zip is written under a temporary
name and renamed only once it checks out.`,
		Example: `  oprov pull registry.example.com/providers/acme/hello:1.0.0 --platform linux_amd64 --out-dir dist
  oprov pull registry.example.com/providers/acme/hello:1.0.0 -o json`,
		Args: argsRange(1, 1, "one reference: REPO:VERSION"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Ref = args[0]
			return runPull(c.Context(), o)
		},
	}
	c.Flags().StringSliceVar(&o.Platforms, "platform", nil, "platforms to pull, OS_ARCH or OS/ARCH (repeatable; default all)")
	c.Flags().StringVar(&o.OutDir, "out-dir", ".", "directory to write the zips into")
	o.registry.register(c)
	o.output.register(c)
	o.output.pathHint = "--out-dir"
	return c
}

func runPull(ctx context.Context, o *pullOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	ref, err := parseVersionRef("pull", o.Ref)
	if err != nil {
		return err
	}
	platforms, err := parsePlatforms(o.Platforms)
	if err != nil {
		return err
	}
	target, err := o.io.Factory.registry(o.registry).Open(ctx, ref, false)
	if err != nil {
		return oci.Explain("pull", ref, err)
	}
	bar := newProgress(o.io, "pulling")
	res, err := artifact.Pull(ctx, target, ref, artifact.PullOptions{Limits: o.io.Factory.Limits, Platforms: platforms, OutDir: o.OutDir, Progress: bar, WriteSums: true})
	bar.Finish()
	if err != nil {
		return oci.Explain("pull", ref, err)
	}
	if o.output.JSON() {
		// A platform is "os_arch" and a zip's digest is zip_digest, as in every command's JSON.
		type fileJSON struct {
			Platform string `json:"platform"`
			Path     string `json:"path"`
			Zip      string `json:"zip_digest"`
			Size     int64  `json:"size"`
		}
		files := []fileJSON{}
		for _, f := range res.Files {
			files = append(files, fileJSON{f.Platform.String(), f.Path, f.Digest, f.Size})
		}
		return writeJSON(o.io.Out, struct {
			Reference   string     `json:"reference"`
			IndexDigest string     `json:"index_digest"`
			Files       []fileJSON `json:"files"`
			SHA256SUMS  string     `json:"sha256sums,omitempty"`
		}{ref.String(), res.Version.Index.Digest.String(), files, res.Sums})
	}
	fmt.Fprintf(o.io.Out, "Pulled %s (%s)\n", ref, res.Version.Index.Digest)
	for _, f := range res.Files {
		fmt.Fprintf(o.io.Out, "  %-14s %s\n", f.Platform, f.Path)
	}
	fmt.Fprintf(o.io.Out, "Checked: the index, manifest and zip digests. Not checked: signatures ('oprov verify %s --key KEY.pub' checks them).\n", ref)
	return nil
}
