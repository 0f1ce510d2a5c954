package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/mirror"
	"github.com/oprov/oprov/pkg/oci"
)

type mirrorOptions struct {
	io         *IOStreams
	Address    string
	Constraint string
	To         string
	Platforms  []string
	GPGKeys    []string
	registry   registryFlags
	output     outputFlag
}

func newMirrorCmd(ios *IOStreams) *cobra.Command {
	o := &mirrorOptions{io: ios}
	c := &cobra.Command{
		Use:   "mirror ADDRESS --version CONSTRAINT --to REPO",
		Short: "Copy a provider from its origin registry into an OCI repository",
		Long: `Read a provider from its origin registry (Provider Registry Protocol v1), check the OpenPGP
signature of each release's SHA256SUMS with the registry's signing keys (or the keys pinned with
--gpg-key) and each zip against SHA256SUMS, and push the versions that meet the constraint in
OpenTofu's OCI format. SHA256SUMS, its signature and the signing key are attached to each index
as a referrer, so the origin's provenance travels with it. Nothing is pushed for a version that
fails a check. Versions already mirrored with identical digests are skipped, and a run cut short
resumes where it stopped.`,
		Example: `  oprov mirror registry.opentofu.org/hashicorp/random --version '~> 3.6' --to mirror.internal/providers/hashicorp/random`,
		Args:    argsRange(1, 1, "one provider address: [HOST/]NAMESPACE/TYPE"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Address = args[0]
			return runMirror(c, o)
		},
	}
	c.Flags().StringVar(&o.Constraint, "version", "", "version constraint, such as '~> 3.6' (default: every version)")
	c.Flags().StringVar(&o.To, "to", "", "destination repository, HOST[:PORT]/PATH or oci-layout:DIR (required)")
	c.Flags().StringSliceVar(&o.Platforms, "platform", nil, "platforms to mirror, OS_ARCH (repeatable; default all)")
	c.Flags().StringSliceVar(&o.GPGKeys, "gpg-key", nil, "armored OpenPGP public key file to pin as the only allowed signer (repeatable)")
	o.registry.register(c)
	o.output.register(c, true)
	return c
}

func runMirror(c *cobra.Command, o *mirrorOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	addr, err := oci.ParseProviderAddress(o.Address)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if o.To == "" {
		return usageErrorf("mirror: --to REPO is required")
	}
	to, err := parseRef(o.To)
	if err != nil {
		return err
	}
	if to.Reference != "" {
		return usageErrorf("mirror: --to names a repository; versions become its tags")
	}
	platforms, err := parsePlatforms(o.Platforms)
	if err != nil {
		return err
	}
	var pinned openpgp.EntityList
	for _, k := range o.GPGKeys {
		el, err := mirror.ReadKeyFile(k)
		if err != nil {
			return err
		}
		pinned = append(pinned, el...)
	}
	ctx := c.Context()
	t, err := oci.Open(ctx, to, o.registry.options(), true)
	if err != nil {
		return oci.Explain("mirror", to, err)
	}
	bar := newProgress(o.io, "mirroring")
	res, err := mirror.Mirror(ctx, t, mirror.Options{
		Address: addr, Constraint: o.Constraint, Platforms: platforms, To: to, Registry: o.registry.options(),
		TrustedKeys: pinned, Progress: bar, Warn: func(msg string) { fmt.Fprintf(o.io.ErrOut, "oprov: warning: %s\n", msg) },
	})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("mirror %s: %w", addr, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Address  string            `json:"address"`
			To       string            `json:"to"`
			Versions []mirror.Mirrored `json:"versions"`
		}{addr.String(), to.String(), res})
	}
	for _, m := range res {
		state := fmt.Sprintf("uploaded %d", m.Uploaded)
		if m.Skipped {
			state = "already mirrored"
		}
		fmt.Fprintf(o.io.Out, "%s %s -> %s:%s (%s; %s; SHA256SUMS signed by %s)\n", addr, m.Version, to, m.Tag, plural(m.Platforms, "platform"), state, m.KeyID)
	}
	return nil
}

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
		Short: "Copy provider versions between registries and layouts, with their signatures",
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
			return runCopy(c, o)
		},
	}
	c.Flags().StringVar(&o.Constraint, "version", "", "copy the versions meeting this constraint")
	c.Flags().BoolVar(&o.AllVersions, "all-versions", false, "copy every version")
	c.Flags().IntVar(&o.Concurrency, "concurrency", oci.DefaultConcurrency, "blobs to copy at once")
	o.registry.register(c)
	o.output.register(c, true)
	return c
}

func runCopy(c *cobra.Command, o *copyOptions) error {
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
	ctx := c.Context()
	st, err := oci.Open(ctx, src.WithReference(""), o.registry.options(), false)
	if err != nil {
		return oci.Explain("copy", src, err)
	}
	dt, err := oci.Open(ctx, dst, o.registry.options(), true)
	if err != nil {
		return oci.Explain("copy", dst, err)
	}
	tags, err := mirror.SelectTags(ctx, st, src.Reference, o.Constraint, o.AllVersions)
	if err != nil {
		return oci.Explain("copy", src, err)
	}
	bar := newProgress(o.io, "copying")
	res, err := mirror.Copy(ctx, st, dt, tags, mirror.CopyOptions{Concurrency: o.Concurrency, Progress: bar})
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
		Use:   "save REF... -o FILE.tar",
		Short: "Write provider versions, with their signatures, into one OCI-layout tarball",
		Long: `Write the named versions (REPO:VERSION, or REPO for every version) with their referrers and
cosign signatures into one OCI image-layout tarball, to carry across an air gap. Inside it each
tag is named REPOSITORY:TAG, so 'oprov load' recreates the repositories under another registry.`,
		Args: argsRange(1, -1, "one or more references"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Refs = args
			return runSave(c, o)
		},
	}
	c.Flags().StringVarP(&o.Out, "out", "o", "", "the tarball to write (required)")
	o.registry.register(c)
	o.output.register(c, false)
	return c
}

func runSave(c *cobra.Command, o *saveOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if o.Out == "" {
		return usageErrorf("save: -o FILE.tar is required")
	}
	ctx := c.Context()
	var items []mirror.SaveItem
	for _, s := range o.Refs {
		ref, err := parseRef(s)
		if err != nil {
			return err
		}
		t, err := oci.Open(ctx, ref.WithReference(""), o.registry.options(), false)
		if err != nil {
			return oci.Explain("save", ref, err)
		}
		tags, err := mirror.SelectTags(ctx, t, ref.Reference, "", ref.Reference == "")
		if err != nil {
			return oci.Explain("save", ref, err)
		}
		items = append(items, mirror.SaveItem{Ref: ref, Src: t, Tags: tags})
	}
	bar := newProgress(o.io, "saving")
	res, err := mirror.Save(ctx, items, o.Out, mirror.CopyOptions{Progress: bar})
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

type loadOptions struct {
	io       *IOStreams
	File     string
	To       string
	Keys     []string
	Policy   string
	registry registryFlags
	output   outputFlag
}

func newLoadCmd(ios *IOStreams) *cobra.Command {
	o := &loadOptions{io: ios}
	c := &cobra.Command{
		Use:   "load FILE.tar --to HOST[/PREFIX]",
		Short: "Push a tarball written by 'oprov save' into a registry",
		Long: `Recreate each repository of a tarball below HOST[/PREFIX], with its referrers and cosign
signatures. Before anything is pushed, every blob is checked against its digest and, with
--policy or --key, every version's signature is verified: a damaged or unsigned tarball pushes
nothing.`,
		Args: argsRange(1, 1, "one tarball"),
		RunE: func(c *cobra.Command, args []string) error {
			o.File = args[0]
			return runLoad(c, o)
		},
	}
	c.Flags().StringVar(&o.To, "to", "", "registry (and path prefix) to load into (required)")
	c.Flags().StringSliceVar(&o.Keys, "key", nil, "require signatures by this public key (repeatable)")
	c.Flags().StringVar(&o.Policy, "policy", "", "require signatures under this trust policy")
	o.registry.register(c)
	o.output.register(c, true)
	return c
}

func runLoad(c *cobra.Command, o *loadOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	if o.To == "" {
		return usageErrorf("load: --to HOST[/PREFIX] is required")
	}
	policy, err := policyFromFlags(o.Keys, o.Policy)
	if err != nil {
		return err
	}
	ctx := c.Context()
	b, err := mirror.OpenBundle(ctx, o.File)
	if err != nil {
		return fmt.Errorf("load: %w (nothing was pushed)", err)
	}
	bar := newProgress(o.io, "loading")
	res, err := mirror.Load(ctx, b, mirror.LoadOptions{To: o.To, Registry: o.registry.options(), Policy: policy, Copy: mirror.CopyOptions{Progress: bar}, Log: o.io.ErrOut})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("load %s: %w", o.File, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, res)
	}
	for _, l := range res {
		fmt.Fprintf(o.io.Out, "Loaded %s into %s: %d uploaded, %d already there\n", strings.Join(l.Result.Tags, ", "), l.Repository, l.Result.Uploaded, l.Result.Skipped)
	}
	return nil
}

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
			return runAttach(c, o)
		},
	}
	c.Flags().StringVar(&o.ArtifactType, "artifact-type", "", "the referrer's artifact type (required)")
	c.Flags().StringVar(&o.MediaType, "media-type", "", "the file's media type (default: the artifact type)")
	o.registry.register(c)
	o.output.register(c, true)
	return c
}

func runAttach(c *cobra.Command, o *attachOptions) error {
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
	ctx := c.Context()
	t, err := oci.Open(ctx, ref, o.registry.options(), false)
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
	d, err := oci.Attach(ctx, t, subject, o.ArtifactType, []oci.AttachFile{{Name: baseName(o.File), MediaType: mt, Path: o.File}}, nil)
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
		Args:  argsRange(1, 1, "one reference: REPO:VERSION"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Ref = args[0]
			return runDiscover(c, o)
		},
	}
	c.Flags().IntVar(&o.Depth, "depth", 2, "how many levels of referrers to follow")
	o.registry.register(c)
	o.output.register(c, true)
	return c
}

func runDiscover(c *cobra.Command, o *discoverOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	ref, err := parseVersionRef("discover", o.Ref)
	if err != nil {
		return err
	}
	ctx := c.Context()
	t, err := oci.Open(ctx, ref, o.registry.options(), false)
	if err != nil {
		return oci.Explain("discover", ref, err)
	}
	subject, err := t.Resolve(ctx, ref.Reference)
	if err != nil {
		return oci.Explain("discover", ref, err)
	}
	refs, err := oci.Discover(ctx, t, subject, o.Depth)
	if err != nil {
		return oci.Explain("discover", ref, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Subject   string         `json:"subject"`
			Referrers []oci.Referrer `json:"referrers"`
		}{subject.Digest.String(), append([]oci.Referrer{}, refs...)})
	}
	fmt.Fprintf(o.io.Out, "%s (%s)\n", ref, subject.Digest)
	var show func([]oci.Referrer, string)
	show = func(rs []oci.Referrer, indent string) {
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
