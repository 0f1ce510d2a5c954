package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
	"github.com/oprov/oprov/pkg/publish"
	"github.com/oprov/oprov/pkg/sign"
)

type pushOptions struct {
	io          *IOStreams
	Sources     []string
	Repo        string
	Module      string // push --module DIR|ZIP: a module package instead of a provider release
	Version     string // with --module
	Address     string
	Concurrency int
	Sign        bool
	Key         string
	LegacyTag   bool
	keyless     keylessSignFlags // push --sign without --key
	registry    registryFlags
	output      outputFlag
}

func newPushCmd(ios *IOStreams) *cobra.Command {
	o := &pushOptions{io: ios}
	c := &cobra.Command{
		Use:   "push SRC... REPO | push --module DIR REPO:VERSION",
		Short: "Publish a provider release to an OCI registry or layout",
		Long: `Publish one provider version in OpenTofu's OCI format: an index tagged with the version,
one manifest per platform, and each platform's release zip as its layer.

SRC is a directory of release zips (goreleaser's dist/ works as is), some zip files, or a
SHA256SUMS file. All zips must share one type and version; each is checked against SHA256SUMS
when one is present, and must hold the provider executable.

REPO is HOST[:PORT]/PATH (tagged with the version; an explicit :TAG must equal it) or
oci-layout:DIR. Content already there is not uploaded again, and the tag moves last.

With --module DIR (or the zip 'oprov package --module' wrote), push a module instead, as
OpenTofu's module package: one image manifest with artifactType application/vnd.opentofu.modulepkg
and the module's deterministic zip as its one archive/zip layer, tagged with the version (REPO's
tag, or --version). The same module and version always give the same manifest digest. OpenTofu
>= 1.10 installs it from module { source = "oci://REPO?tag=VERSION" }. --sign signs the manifest.`,
		Example: `  oprov push dist/ registry.example.com/providers/acme/hello
  oprov push dist/terraform-provider-hello_1.0.0_SHA256SUMS oci-layout:./layout
  oprov push --module ./modules/network registry.example.com/modules/network:1.2.0 --sign --key cosign.key`,
		Args: func(c *cobra.Command, args []string) error {
			if o.Module != "" {
				return argsRange(1, -1, "a repository: --module DIR REPO[:VERSION]")(c, args)
			}
			return argsRange(2, -1, "release files and a repository: SRC... REPO")(c, args)
		},
		RunE: func(c *cobra.Command, args []string) error {
			o.Sources, o.Repo = args[:len(args)-1], args[len(args)-1]
			if o.Module != "" {
				if err := o.output.check(); err != nil {
					return err
				}
				return runPushModule(c.Context(), o)
			}
			return runPush(c.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Module, "module", "", "push a module instead: its directory (zipped as 'oprov package --module' does) or the zip that wrote, as OpenTofu's module package")
	c.Flags().StringVar(&o.Version, "version", "", "with --module: the module's version, the tag (default: REPO's tag)")
	c.Flags().StringVar(&o.Address, "address", "", "provider source address for the printed CLI config (default: registry.opentofu.org/NAMESPACE/TYPE from REPO, said on stderr)")
	concurrencyFlag(c, &o.Concurrency, "blobs to upload at once")
	c.Flags().BoolVar(&o.Sign, "sign", false, "sign the version right after pushing it: with --key, else keylessly with the CI's identity (as 'oprov sign')")
	c.Flags().StringVar(&o.Key, "key", "", "cosign private key for --sign")
	o.keyless.register(c, "with --sign, keyless: ")
	c.Flags().BoolVar(&o.LegacyTag, "legacy-tag", false, "with --sign: store cosign v2's sha256-<hex>.sig tag instead of a bundle referrer")
	o.registry.register(c)
	o.output.register(c)
	return c
}

func runPush(ctx context.Context, o *pushOptions) error {
	if err := o.output.check(); err != nil {
		return err
	}
	ref, err := parseRef(o.Repo)
	if err != nil {
		return err
	}
	var addr manifest.ProviderAddress
	if o.Address != "" {
		if addr, err = manifest.ParseProviderAddress(o.Address); err != nil {
			return usageErrorf("--address: %v", err)
		}
	}
	signer, signOpts, signing, err := o.signing(ctx)
	if err != nil {
		return err
	}
	if _, _, err := providerrelease.SourceDateEpoch(); err != nil {
		return err // before anything is read: publish records it on the index
	}
	rel, err := providerrelease.Collect(ctx, o.Sources)
	if err != nil {
		return fmt.Errorf("push: %w%s", err, moduleHint(o.Sources))
	}
	if ref, err = versionTagged(ref, rel); err != nil {
		return err
	}
	if o.Address == "" {
		addr = artifact.GuessProviderAddress(ref)
		addr.Type = rel.Type
	}

	target, err := o.io.Factory.registry(o.registry).Open(ctx, ref, true)
	if err != nil {
		return oci.Explain("push", ref, err)
	}
	bar := newProgress(o.io, "pushing")
	res, err := publish.Release(ctx, target, ref, rel, publish.Options{Concurrency: o.Concurrency, Progress: bar, Sign: signing, Signer: signer, SignOptions: signOpts})
	bar.Finish()
	if res != nil {
		for _, w := range res.Warnings {
			fmt.Fprintf(o.io.ErrOut, "oprov: warning: %s\n", w)
		}
	}
	var se *publish.SignError
	switch {
	case errors.As(err, &se):
		return oci.Explain("sign", ref, se)
	case err != nil:
		return oci.Explain("push", ref, err)
	}
	return printPushed(o, ref, rel, addr, res, oci.IsPlainHTTP(target))
}

// versionTagged gives the repository tagged with the release's version. A tag the user gave must
// already be that version: the tag is how OpenTofu finds a version, so it cannot be anything else.
func versionTagged(ref oci.Ref, rel *providerrelease.Release) (oci.Ref, error) {
	tag, err := manifest.VersionToTag(rel.Version)
	if err != nil {
		return oci.Ref{}, fmt.Errorf("push: %w", err)
	}
	if ref.Reference != "" {
		if ref.IsDigest() {
			return oci.Ref{}, usageErrorf("push %s: push to a tag, not a digest (the tag is the version, %s)", ref, tag)
		}
		v, err := manifest.TagToVersion(ref.Reference)
		if err != nil {
			return oci.Ref{}, fmt.Errorf("push %s: %w; the tag must be the release's version (%s), so leave it off", ref, err, tag)
		}
		if v != rel.Version {
			return oci.Ref{}, fmt.Errorf("push %s: the tag says version %s but the zips are version %s (leave the tag off, or push the matching release)", ref, v, rel.Version)
		}
	}
	return ref.WithReference(tag), nil
}

type platformJSON struct {
	Platform string `json:"platform"`
	Manifest string `json:"manifest_digest"`
	Zip      string `json:"zip_digest"`
	Size     int64  `json:"size"`
	Filename string `json:"filename"`
	H1       string `json:"h1,omitempty"` // recorded on the index entry (dev.oprov.h1)
}

// printPushed says what was pushed and, for a registry OpenTofu can install from (HTTPS), the CLI
// configuration that installs it. Over plain HTTP OpenTofu cannot, so no configuration is printed
// that would not work; the publisher's warning says so.
func printPushed(o *pushOptions, ref oci.Ref, rel *providerrelease.Release, addr manifest.ProviderAddress, res *publish.Result, plainHTTP bool) error {
	tofurc := ""
	if !ref.IsLayout() && !plainHTTP {
		if o.Address == "" {
			fmt.Fprintf(o.io.ErrOut, "oprov: note: the CLI configuration below assumes the provider's source address is %s, guessed from %s; give --address HOST/NAMESPACE/TYPE (the source in your required_providers) for another\n", addr, ref.Repo())
		}
		// Credentials oprov found where OpenTofu does not look (DOCKER_CONFIG, --registry-config)
		// are named for it.
		var notes []string
		printed := artifact.MirrorInstallation(ref, addr)
		printed.Settings = oci.TofuCredentials(oci.TofuCredentialFiles(o.registry.RegistryConfig))
		tofurc, notes = loader.MergePrinted(printed, loader.UserCLIFiles("tofu", ""))
		for _, n := range notes {
			fmt.Fprintln(o.io.ErrOut, "Note: "+n)
		}
	}
	if o.output.JSON() {
		out := struct {
			Reference   string           `json:"reference"`
			Type        string           `json:"type"`
			Version     string           `json:"version"`
			Tag         string           `json:"tag"`
			IndexDigest string           `json:"index_digest"`
			Platforms   []platformJSON   `json:"platforms"`
			Uploaded    int              `json:"uploaded"`
			Skipped     int              `json:"skipped"`
			Bytes       int64            `json:"bytes_uploaded"`
			TofuRC      string           `json:"tofurc,omitempty"`
			Signature   *sign.SignResult `json:"signature,omitempty"`
			Warnings    []string         `json:"warnings,omitempty"`
		}{ref.String(), rel.Type, rel.Version, res.Tag, res.Index.Digest.String(), nil, res.Uploaded, res.Skipped, res.Bytes, tofurc, res.Signed, res.Warnings}
		for i, p := range res.Built.Packages {
			out.Platforms = append(out.Platforms, platformJSON{p.Platform.String(), res.Built.Manifests[i].Descriptor.Digest.String(), p.Digest.String(), p.Size, p.Filename, p.H1})
		}
		return writeJSON(o.io.Out, out)
	}
	w := o.io.Out
	fmt.Fprintf(w, "Pushed %s %s (%s) to %s\n", rel.Type, rel.Version, plural(len(rel.Artifacts), "platform"), ref)
	fmt.Fprintf(w, "Digest: %s\n", res.Index.Digest)
	fmt.Fprintf(w, "Uploaded %d blobs and manifests (%s); %d already there.\n", res.Uploaded, humanBytes(res.Bytes), res.Skipped)
	if res.Signed != nil {
		fmt.Fprintf(w, "Signed: %s (%s)\n", res.Signed.Signature, res.Signed.Form)
	}
	if tofurc != "" {
		fmt.Fprintf(w, "\nOpenTofu >= 1.10 installs %s with this CLI configuration:\n\n%s", addr, tofurc)
	}
	return nil
}

// signing is how push --sign signs, settled before anything is pushed (a wrong password or a
// missing identity stops the push before it starts): with --key, else keylessly. ok is false
// without --sign.
func (o *pushOptions) signing(ctx context.Context) (signer *sign.Signer, opts sign.SignOptions, ok bool, err error) {
	switch {
	case !o.Sign && (o.Key != "" || o.keyless.set()):
		return nil, opts, false, usageErrorf("push: --key and the keyless signing flags go with --sign")
	case !o.Sign:
		return nil, opts, false, nil
	case o.Key != "" && o.keyless.set():
		return nil, opts, false, usageErrorf("push: give --key or the keyless flags (--identity-token, --fulcio-url, --timestamp-server-url, --signing-config), not both")
	case o.Key == "" && o.LegacyTag:
		return nil, opts, false, usageErrorf("push: keyless signatures are stored as bundles only (cosign v3's form, which cosign v2 with --new-bundle-format reads too): drop --legacy-tag")
	}
	opts.Legacy = o.LegacyTag
	if o.Key == "" {
		opts.Keyless, err = o.keyless.keyless(ctx, "push --sign")
		return nil, opts, err == nil, err
	}
	if signer, err = sign.LoadSigner(o.Key, passwordFunc(o.io)); err != nil {
		return nil, opts, false, fmt.Errorf("push: %w", err)
	}
	return signer, opts, true, nil
}
