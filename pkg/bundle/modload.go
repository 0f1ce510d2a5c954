package bundle

import (
	"context"
	"fmt"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/pkg/artifactcopy"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/modulepkg"
	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// loadModule is one module package a load pushes, checked: its manifest and zip as read from
// the bundle (digests checked, hashes against the listing).
type loadModule struct {
	listed  ListedModule
	ref     ociref.Ref // below --to, with the tag
	view    ociref.ReadOnly
	dst     ociref.Target
	pending []artifactcopy.Pending
}

// moduleRepos are the repositories a listing names for modules: load handles them apart from
// the providers' (a module package is one manifest, not an index).
func (l *Listing) moduleRepos() map[string]bool {
	out := map[string]bool{}
	if l == nil {
		return out
	}
	for _, m := range l.Modules {
		out[m.Repository] = true
	}
	return out
}

// checkModules checks every module the listing names before anything is pushed: its repository
// is the one its source address gives (moduleRepository, computed again), its tag the one its
// version gives, and, held in the bundle, the package under that tag is the listed manifest, a
// module package (one zip layer) whose provenance names the listed source, whose zip hashes to
// the listed h1: and zh: and unpacks without leaving its directory; under a policy whose rule
// covers its destination, its signature must verify. It gives what to push; a module a delta
// leaves to its base is looked for where the base was loaded (noted in the report when absent).
func (l *load) checkModules(ctx context.Context, report *LoadReport) ([]*loadModule, error) {
	if l.b.Listing == nil {
		return nil, nil
	}
	var out []*loadModule
	seen := map[string]bool{}
	for _, m := range l.b.Listing.Modules {
		at := fmt.Sprintf("module call %s (source %s)", m.Call, m.Source)
		err := checkListedModule(m)
		if a, ok := l.addrs[m.Repository]; ok && err == nil {
			err = fmt.Errorf("it puts the module in %s, the repository of the provider %s", m.Repository, a)
		}
		if err != nil {
			return nil, fmt.Errorf("the bundle's listing (%s) does not match what the bundle holds: %s: %w; nothing was pushed", listingName, at, err)
		}
		ref, err := l.dstRef(m.Repository)
		if err != nil {
			return nil, err
		}
		ref.Reference = m.Tag
		if !m.InBundle {
			if err := l.moduleAtBase(ctx, ref, m); err != nil {
				report.Left = append(report.Left, fmt.Sprintf("%s: %v", at, err))
				continue
			}
			l.printMods = append(l.printMods, m)
			continue
		}
		lm, err := l.readModule(ctx, ref, m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; nothing was pushed", at, err)
		}
		if key := m.Repository + ":" + m.Tag; !seen[key] {
			seen[key] = true
			out = append(out, lm)
		}
		l.printMods = append(l.printMods, m)
	}
	return out, nil
}

// checkListedModule checks what a listing says of one module against itself: the repository and
// tag its source and version give.
func checkListedModule(m ListedModule) error {
	repo, err := moduleRepository(m.Source)
	if err != nil {
		return err
	}
	if m.Repository != repo {
		return fmt.Errorf("it puts the module in repository %q, not %q", m.Repository, repo)
	}
	s, _ := module.ParseSource(m.Source)
	if m.Kind != s.Kind.String() {
		return fmt.Errorf("it says the module is a %s module; its source is a %s one", m.Kind, s.Kind)
	}
	tag, err := moduleTag(m.Kind, m.Version, m.ZH)
	if err != nil {
		return err
	}
	if m.Tag != tag {
		return fmt.Errorf("it lists version %q under the tag %q, not %q", m.Version, m.Tag, tag)
	}
	if _, err := digest.Parse(m.Manifest); err != nil {
		return fmt.Errorf("its manifest digest %q: %w", m.Manifest, err)
	}
	return checkTag(m.Repository, m.Tag)
}

// readModule reads and checks one module package the bundle holds (see checkModules).
func (l *load) readModule(ctx context.Context, ref ociref.Ref, m ListedModule) (*loadModule, error) {
	view := l.moduleView(ctx, m.Repository)
	d, err := view.Resolve(ctx, m.Tag)
	if err != nil {
		return nil, fmt.Errorf("the bundle does not hold %s:%s, which its listing names: %w", m.Repository, m.Tag, err)
	}
	if d.Digest.String() != m.Manifest {
		return nil, fmt.Errorf("the listing says %s:%s is %s, the bundle holds %s", m.Repository, m.Tag, m.Manifest, d.Digest)
	}
	res, err := modulepkg.Resolve(ctx, view, m.Manifest)
	if err != nil {
		return nil, fmt.Errorf("the bundle's %s:%s: %w", m.Repository, m.Tag, err)
	}
	if err := checkProvenance(m, res); err != nil {
		return nil, err
	}
	zip, err := res.FetchZip(ctx, view, l.opts.Registry.Bounds().MaxPackageSize)
	if err != nil {
		return nil, err
	}
	h1, zh, err := modulepkg.Hashes(zip)
	if err != nil {
		return nil, err
	}
	if h1 != m.H1 || zh != m.ZH {
		return nil, fmt.Errorf("its package hashes to %s %s, the listing says %s %s: the bundle was changed", h1, zh, m.H1, m.ZH)
	}
	if err := checkModuleZip(zip); err != nil {
		return nil, err
	}
	if _, err := artifactcopy.VerifyAll(ctx, view, []string{m.Tag}, l.opts.Registry.Bounds()); err != nil {
		return nil, fmt.Errorf("the bundle is damaged: %s: %w", m.Repository, err)
	}
	if err := l.verifyModule(ctx, view, ref, res); err != nil {
		return nil, err
	}
	return &loadModule{listed: m, ref: ref, view: view}, nil
}

// checkProvenance checks that a module package is the one the listing names: an oci:// module's
// own package by its digest (its version), any other by the source its annotations record.
func checkProvenance(m ListedModule, res *modulepkg.Resolved) error {
	if m.Kind == module.KindOCI.String() {
		if res.Manifest.Digest.String() != m.Version {
			return fmt.Errorf("the package in the bundle is %s, the listing names version %s", res.Manifest.Digest, m.Version)
		}
		return nil
	}
	pkgSrc := m.Source
	if s, err := module.ParseSource(m.Source); err == nil {
		pkgSrc = s.Package()
	}
	if got := res.Parsed.Annotations[modulepkg.AnnotationSource]; got != pkgSrc {
		return fmt.Errorf("the package in the bundle says it comes from %q, the listing %q", got, pkgSrc)
	}
	return nil
}

// moduleView is a module repository's view of the bundle (a delta's reads the blobs its base had
// from where the base was loaded).
func (l *load) moduleView(ctx context.Context, repo string) ociref.ReadOnly {
	v := l.b.Repo(repo)
	if len(l.b.Listing.Omitted) == 0 {
		return v
	}
	omitted := map[digest.Digest]bool{}
	for _, d := range l.b.Listing.Omitted {
		omitted[digest.Digest(d)] = true
	}
	ref, err := l.dstRef(repo)
	if err != nil {
		return v
	}
	dst, err := l.opts.Registry.Open(ctx, ref, false)
	if err != nil {
		return v
	}
	return &deltaView{ReadOnly: v, base: dst, omitted: omitted}
}

// verifyModule verifies a module's signature when the policy asks for it: when a trust rule
// covers the repository it goes to. A module no rule covers is loaded on its hashes (checked
// against the listing) alone.
func (l *load) verifyModule(ctx context.Context, view ociref.ReadOnly, ref ociref.Ref, res *modulepkg.Resolved) error {
	p := l.opts.Policy
	if p == nil || p.Match(ref.Repo(), "") == nil {
		return nil
	}
	d, err := sign.DecideModule(ctx, view, ref, res, p, sign.VerifyOptions{})
	if err != nil {
		return fmt.Errorf("%w (a module from git, HTTP or a module registry carries no signature: to load it on its hashes, give a --policy whose trust rules leave %s out)", err, ref.Repo())
	}
	if d.Warning != nil && l.opts.Log != nil {
		fmt.Fprintf(l.opts.Log, "oprov: warning (policy mode warn): %v\n", d.Warning)
	}
	return nil
}

// moduleAtBase checks that a module a delta leaves to its base is where the base was loaded.
func (l *load) moduleAtBase(ctx context.Context, ref ociref.Ref, m ListedModule) error {
	dst, err := l.opts.Registry.Open(ctx, ref.WithReference(""), false)
	var d ocispec.Descriptor
	if err == nil {
		d, err = dst.Resolve(ctx, m.Tag)
	}
	if err != nil || d.Digest.String() != m.Manifest {
		return fmt.Errorf("the delta leaves it to its base, and %s does not hold it as listed (%s): load the base there", ref, m.Manifest)
	}
	return nil
}

// pushModules copies every checked module's content (the empty config, the zip, the manifest,
// and what refers to it: signatures), tagging nothing: tags go last, with the providers'
// (tagModules).
func (l *load) pushModules(ctx context.Context, mods []*loadModule) ([]Loaded, error) {
	var out []Loaded
	for _, m := range mods {
		dst, err := l.openDst(ctx, m.listed.Repository, m.ref.WithReference(""))
		if err != nil {
			return nil, ociref.Explain("load", m.ref, err)
		}
		copts := l.opts.Copy
		copts.SizesOnly = true // checkModules read every blob against its digest
		res, pending, err := artifactcopy.CopyContent(ctx, m.view, dst, []string{m.listed.Tag}, copts)
		if err != nil {
			return nil, fmt.Errorf("%w (no tag was written)", ociref.Explain("load", m.ref, err))
		}
		m.dst, m.pending = dst, pending
		out = append(out, Loaded{Repository: m.ref.Repo(), Result: res})
	}
	return out, nil
}

// tagModules tags every pushed module package (its .sig tag first).
func (l *load) tagModules(ctx context.Context, mods []*loadModule) error {
	for _, m := range mods {
		if err := artifactcopy.ApplyTags(ctx, m.dst, m.pending); err != nil {
			return ociref.Explain("load", m.ref, err)
		}
	}
	return nil
}
