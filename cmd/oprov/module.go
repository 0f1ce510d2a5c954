package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2/hclwrite"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// Modules (OpenTofu's module package: one image manifest, artifactType modulepkg, one zip layer)
// go through the same commands as providers: package --module, push --module, and sign, verify,
// inspect and copy, which tell a module from a provider by what the reference names.

// moduleJSON describes a module package, for -o json.
type moduleJSON struct {
	Reference   string            `json:"reference,omitempty"`
	Path        string            `json:"path,omitempty"`
	Version     string            `json:"version,omitempty"`
	Tag         string            `json:"tag,omitempty"`
	Manifest    string            `json:"manifest_digest"`
	Zip         string            `json:"zip_digest"`
	Size        int64             `json:"size"`
	H1          string            `json:"h1,omitempty"`
	ZH          string            `json:"zh,omitempty"`
	Source      string            `json:"tofu_source,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// moduleAnnotations are the annotations oprov writes on a module package it publishes.
func moduleAnnotations(version string) map[string]string {
	if version == "" {
		return nil
	}
	return map[string]string{ocispec.AnnotationVersion: version, modulepkg.AnnotationVersion: version}
}

// readModule gives a module's zip: made from a directory (modulepkg.Zip), or read from a zip that
// 'oprov package --module' wrote, checked to unpack safely.
func readModule(src string) ([]byte, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", src, err)
	}
	if st.IsDir() {
		return modulepkg.Zip(src)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "oprov-module-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := modulepkg.Unpack(data, filepath.Join(tmp, "module")); err != nil {
		if inner := errors.Unwrap(err); inner != nil { // without the temporary directory's name
			err = inner
		}
		return nil, fmt.Errorf("module %s is not a module's zip that unpacks safely: %w (give the module's directory, or a zip 'oprov package --module' wrote)", src, err)
	}
	return data, nil
}

// moduleHint is what a provider push that failed says when a source looks like a module
// directory (it holds .tf files): that modules are pushed with --module.
func moduleHint(sources []string) string {
	for _, src := range sources {
		if tf, _ := filepath.Glob(filepath.Join(src, "*.tf")); len(tf) > 0 {
			return fmt.Sprintf(" (%s holds .tf files: to publish it as a module, run 'oprov push --module %s REPO:VERSION')", src, src)
		}
	}
	return ""
}

// describeModule fills what every command prints about a module zip.
func describeModule(zipData []byte, version string) (moduleJSON, error) {
	h1, zh, err := modulepkg.Hashes(zipData)
	if err != nil {
		return moduleJSON{}, err
	}
	desc, _, err := modulepkg.Build(zipData, moduleAnnotations(version))
	if err != nil {
		return moduleJSON{}, err
	}
	layer := modulepkg.LayerDescriptor(zipData)
	return moduleJSON{Version: version, Manifest: desc.Digest.String(), Zip: layer.Digest.String(), Size: layer.Size, H1: h1, ZH: zh}, nil
}

// runPackageModule writes a module directory's deterministic zip into --out-dir.
func runPackageModule(o *packageOptions) error {
	if countSet(o.GoDir, o.BinDir, o.PyDir, o.StdioDir) != 0 || len(o.Platforms) > 0 || len(o.PyVersions) > 0 || o.PyPins != "" {
		return usageErrorf("package: --module DIR packages a module: give no provider flags (--go, --bin, --python, --stdio, --platform) with it")
	}
	if o.Version != "" {
		if _, err := manifest.VersionToTag(o.Version); err != nil {
			return usageErrorf("package --module: --version: %v", err)
		}
	}
	zipData, err := modulepkg.Zip(o.ModuleDir)
	if err != nil {
		return fmt.Errorf("package: %w", err)
	}
	out, err := describeModule(zipData, o.Version)
	if err != nil {
		return fmt.Errorf("package: %w", err)
	}
	name := o.Name
	if name == "" {
		abs, _ := filepath.Abs(o.ModuleDir)
		name = filepath.Base(abs)
	}
	file := name + ".zip"
	if o.Version != "" {
		file = name + "_" + o.Version + ".zip"
	}
	out.Path = filepath.Join(o.OutDir, file)
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return fmt.Errorf("package: --out-dir: %w", err)
	}
	err = scratch.WriteFileAtomic(out.Path, func(w io.Writer) error { _, err := w.Write(zipData); return err })
	if err != nil {
		return fmt.Errorf("package: %w", err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, out)
	}
	fmt.Fprintf(o.io.Out, "Packaged module %s into %s (%s)\n  %s\n  %s\n", o.ModuleDir, out.Path, humanBytes(out.Size), out.H1, out.ZH)
	fmt.Fprintf(o.io.Out, "Pushed with 'oprov push --module %s REPO:%s', its manifest digest will be %s\n", out.Path, orVersion(o.Version), out.Manifest)
	return nil
}

func orVersion(v string) string {
	if v == "" {
		return "VERSION"
	}
	return v
}

// moduleTag gives the version a module push tags: the reference's tag and --version must agree,
// and the tag is a version, as serve's module registry lists them.
func moduleTag(ref oci.Ref, version string) (oci.Ref, string, error) {
	if ref.IsDigest() {
		return oci.Ref{}, "", usageErrorf("push --module %s: push to a tag, not a digest", ref)
	}
	if ref.Reference == "" && version == "" {
		return oci.Ref{}, "", usageErrorf("push --module: say which version: REPO:VERSION or --version VERSION")
	}
	if ref.Reference != "" {
		v, err := manifest.TagToVersion(ref.Reference)
		if err != nil {
			return oci.Ref{}, "", usageErrorf("push --module %s: %v; a module's tag is its version (1.2.0)", ref, err)
		}
		if version != "" && v != version {
			return oci.Ref{}, "", usageErrorf("push --module %s: the tag says version %s but --version says %s", ref, v, version)
		}
		return ref, v, nil
	}
	tag, err := manifest.VersionToTag(version)
	if err != nil {
		return oci.Ref{}, "", usageErrorf("push --module: --version: %v", err)
	}
	return ref.WithReference(tag), version, nil
}

// runPushModule packages a module directory (or takes a packaged zip) and pushes it as one
// module package, signing it when asked.
func runPushModule(ctx context.Context, o *pushOptions) error {
	if o.Address != "" {
		return usageErrorf("push --module: --address names a provider; a module needs none")
	}
	if len(o.Sources) > 0 {
		return usageErrorf("push --module DIR REPO:VERSION: the module comes from --module; give only the repository")
	}
	signer, signOpts, signing, err := o.signing(ctx)
	if err != nil {
		return err
	}
	ref, err := parseRef(o.Repo)
	if err != nil {
		return err
	}
	ref, version, err := moduleTag(ref, o.Version)
	if err != nil {
		return err
	}
	zipData, err := readModule(o.Module)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	out, err := describeModule(zipData, version)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	target, err := o.io.Factory.registry(o.registry).Open(ctx, ref, true)
	if err != nil {
		return oci.Explain("push", ref, err)
	}
	desc, err := modulepkg.Push(ctx, target, zipData, ref.Reference, moduleAnnotations(version))
	if err != nil {
		return oci.Explain("push", ref, err)
	}
	out.Reference, out.Tag, out.Manifest = ref.String(), ref.Reference, desc.Digest.String()
	if !ref.IsLayout() {
		out.Source = "oci://" + ref.Repo() + "?tag=" + ref.Reference
	}
	var signed *sign.SignResult
	if signing {
		if signed, err = sign.Sign(ctx, target, ref, desc, signer, signOpts); err != nil {
			return oci.Explain("sign", ref, err)
		}
	}
	return printPushedModule(o, out, signed)
}

func printPushedModule(o *pushOptions, out moduleJSON, signed *sign.SignResult) error {
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			moduleJSON
			Signature *sign.SignResult `json:"signature,omitempty"`
		}{out, signed})
	}
	w := o.io.Out
	fmt.Fprintf(w, "Pushed module %s (%s) to %s\nDigest: %s\n", o.Module, humanBytes(out.Size), out.Reference, out.Manifest)
	if signed != nil {
		fmt.Fprintf(w, "Signed: %s (%s)\n", signed.Signature, signed.Form)
	}
	if out.Source != "" {
		fmt.Fprintf(w, "\nOpenTofu >= 1.10 installs it with:\n\n%s", moduleBlock(out.Source))
	}
	return nil
}

// moduleBlock is a module block calling source, written by hclwrite.
func moduleBlock(source string) []byte {
	f := hclwrite.NewEmptyFile()
	f.Body().AppendNewBlock("module", []string{"NAME"}).Body().SetAttributeValue("source", cty.StringVal(source))
	return f.Bytes()
}

// signSubject is what 'oprov sign' signs: a module package's manifest, or a provider version's
// index.
func signSubject(ctx context.Context, t oci.ReadOnly, ref oci.Ref, l oci.Limits) (ocispec.Descriptor, error) {
	s, err := sign.Resolve(ctx, t, ref, l)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	switch s.Kind {
	case sign.KindModule:
		return s.Module.Manifest, nil
	case sign.KindProvider:
		return s.Version.Index, nil
	}
	return ocispec.Descriptor{}, notProviderOrModule(ref, s)
}

// notProviderOrModule refuses a reference that names an image or another artifact, for a
// command that acts on provider versions and module packages.
func notProviderOrModule(ref oci.Ref, s *sign.Subject) error {
	return fmt.Errorf("%s (%s) is an image or another artifact (%s), neither a provider version nor a module package", ref, s.Desc.Digest, s.Desc.MediaType)
}

// fetchModule fetches a resolved module's zip (within the package size limit) and describes it.
func fetchModule(ctx context.Context, t oci.ReadOnly, ref oci.Ref, m *modulepkg.Resolved, l oci.Limits) (moduleJSON, error) {
	l = l.WithDefaults()
	if err := l.CheckBlobSize("the module zip", m.Layer().Size); err != nil {
		return moduleJSON{}, err
	}
	zipData, err := m.FetchZip(ctx, t, l.MaxPackageSize)
	if err != nil {
		return moduleJSON{}, err
	}
	out, err := describeModule(zipData, "")
	if err != nil {
		return moduleJSON{}, fmt.Errorf("%s: %w", ref, err)
	}
	out.Reference, out.Manifest, out.Annotations = ref.String(), m.Manifest.Digest.String(), m.Parsed.Annotations
	out.Version = m.Parsed.Annotations[ocispec.AnnotationVersion]
	if !ref.IsDigest() {
		out.Tag = ref.Reference
	}
	return out, nil
}

// runInspectModule shows a module package: digests, size, hashes and annotations.
func runInspectModule(ctx context.Context, o *inspectOptions, t oci.ReadOnly, ref oci.Ref, m *modulepkg.Resolved) error {
	out, err := fetchModule(ctx, t, ref, m, o.io.Factory.Limits)
	if err != nil {
		return oci.Explain("inspect", ref, err)
	}
	if o.output.JSON() {
		return writeJSON(o.io.Out, struct {
			Kind string `json:"kind"`
			moduleJSON
		}{"module", out})
	}
	w := o.io.Out
	fmt.Fprintf(w, "%s (module package)\nDigest: %s\nZip:    %s (%s)\n  %s\n  %s\n", ref, out.Manifest, out.Zip, humanBytes(out.Size), out.H1, out.ZH)
	for _, k := range sortedKeys(out.Annotations) {
		fmt.Fprintf(w, "  %s = %s\n", k, out.Annotations[k])
	}
	return nil
}
