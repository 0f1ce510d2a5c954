package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/oci/referrers"
)

type attachOptions struct {
	io           *IOStreams
	Ref, File    string
	ArtifactType string
	MediaType    string
	registry     registryFlags
	output       outputFlag
}

func newAttachCmd(ios *IOStreams) *cobra.Command {
	o := &attachOptions{io: ios}
	c := &cobra.Command{
		Use:     "attach REPO:VERSION --artifact-type TYPE FILE",
		Short:   "Attach a file (an SBOM, a report) to a provider version as an OCI referrer",
		Example: `  oprov attach registry.example.com/providers/acme/hello:1.0.0 --artifact-type application/spdx+json sbom.spdx.json`,
		Args:    argsRange(2, 2, "a reference and a file"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Ref, o.File = args[0], args[1]
			return runAttach(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.ArtifactType, "artifact-type", "", "the referrer's artifact type (required)")
	c.Flags().StringVar(&o.MediaType, "media-type", "", "the file's media type (default: the artifact type)")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runAttach(ctx context.Context, o *attachOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if o.ArtifactType == "" {
		return usageErrorf("attach: --artifact-type is required")
	}
	ref, err := parseVersionRef("attach", o.Ref)
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.File); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	t, err := o.io.Factory.registry(o.registry).Open(ctx, ref, false)
	if err != nil {
		return oci.Explain("attach", ref, err)
	}
	subject, err := t.Resolve(ctx, ref.Reference)
	if err != nil {
		return oci.Explain("attach", ref, err)
	}
	mt := o.MediaType
	if mt == "" {
		mt = o.ArtifactType
	}
	d, err := referrers.Attach(ctx, t, subject, o.ArtifactType, []referrers.AttachFile{{Name: baseName(o.File), MediaType: mt, Path: o.File}}, nil)
	if err != nil {
		return oci.Explain("attach", ref, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, map[string]string{"subject": subject.Digest.String(), "referrer": d.Digest.String(), "artifact_type": o.ArtifactType})
	}
	fmt.Fprintf(o.io.Out, "Attached %s to %s (%s) as %s\n", o.File, ref, subject.Digest, d.Digest)
	return nil
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}
