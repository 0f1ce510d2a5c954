package bundle

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifactcopy"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/modulepkg"
	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash/unzip"
)

// ListedModule is one remote module call in a configuration bundle: the module package the
// bundle holds for it (OpenTofu's modulepkg: one manifest, one zip layer), where, and the hashes
// load checks it against.
type ListedModule struct {
	Call    string `json:"call"`   // module.vpc.module.subnets
	Key     string `json:"key"`    // vpc.subnets, as the module lock and modules.json key it
	Source  string `json:"source"` // the full source address, as the module lock records it
	Kind    string `json:"kind"`   // registry, git, http or oci
	Version string `json:"version,omitempty"`
	// VersionFrom is "module lock", or why there was no lock entry to follow.
	VersionFrom    string `json:"version_from"`
	OriginChecksum string `json:"origin_checksum,omitempty"`
	Repository     string `json:"repository"` // in the bundle, and below a load's destination
	Tag            string `json:"tag"`
	Manifest       string `json:"manifest_digest"`
	H1             string `json:"h1"`
	ZH             string `json:"zh"`
	// InBundle is false for a module a delta left out: its base holds it unchanged.
	InBundle bool `json:"in_bundle"`
}

// moduleRepository is the repository a module package goes to, in a bundle and below a load's
// destination, from its source address alone (load computes it again rather than trust the
// listing): registry modules under modules/HOST/NAMESPACE/NAME/SYSTEM (the layout `oprov serve`
// answers the Module Registry Protocol from), others under modules/KIND/ and their URL's host
// and path, each part made a valid repository component.
func moduleRepository(source string) (string, error) {
	s, err := module.ParseSource(source)
	if err != nil {
		return "", err
	}
	var parts []string
	switch s.Kind {
	case module.KindLocal:
		return "", fmt.Errorf("%s is a local module: it travels with its caller", source)
	case module.KindRegistry:
		r := s.Registry
		parts = []string{r.Host.String(), r.Namespace, r.Name, r.TargetSystem}
	default:
		parts = append([]string{s.Kind.String()}, urlParts(s.URL)...)
	}
	repo := "modules"
	for i, p := range parts {
		c := repoPart(p)
		if low := strings.ToLower(p); i > 0 && s.Kind == module.KindRegistry && repoComponent().MatchString(low) {
			c = low // as `oprov serve` puts ${namespace}, ${name} and ${system}
		}
		if c != "" {
			repo += "/" + c
		}
	}
	if checkRepository(repo) != nil || strings.Count(repo, "/") < 2 {
		sum := sha256.Sum256([]byte(s.Package()))
		repo = "modules/" + s.Kind.String() + "/sha256-" + hex.EncodeToString(sum[:8])
	}
	return repo, nil
}

// urlParts are a package URL's host and path parts (no scheme, user, query or .git suffix).
func urlParts(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		base, _, _ := strings.Cut(raw, "?")
		return strings.FieldsFunc(base, func(r rune) bool { return r == '/' || r == ':' || r == '@' })
	}
	return append([]string{u.Host}, strings.Split(strings.TrimSuffix(u.Path, ".git"), "/")...)
}

// repoPart makes s a repository path component: lowercase letters and digits, every other run
// of characters one '.' (a lone '.') or '-', none at either end.
func repoPart(s string) string {
	var b strings.Builder
	sep := ""
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if b.Len() > 0 && sep != "" {
				if sep == "." {
					b.WriteByte('.')
				} else {
					b.WriteByte('-')
				}
			}
			sep = ""
			b.WriteRune(r)
			continue
		}
		sep += string(r)
	}
	return b.String()
}

// moduleTag is a module package's tag: a registry module's version, a git commit, an OCI
// manifest's digest (oci-sha256-HEX), or for an HTTP archive (which has no version) its zh: hash.
func moduleTag(kind, version, zh string) (string, error) {
	tag, err := moduleTagOf(kind, version, zh)
	if err == nil && !tagName().MatchString(tag) {
		err = fmt.Errorf("version %q makes no valid OCI tag (%q)", version, tag)
	}
	return tag, err
}

func moduleTagOf(kind, version, zh string) (string, error) {
	switch kind {
	case module.KindRegistry.String():
		return manifest.VersionToTag(version)
	case module.KindGit.String():
		if len(version) >= 7 && repoPart(version) == strings.ToLower(version) && !strings.ContainsAny(version, ".-") {
			return strings.ToLower(version), nil
		}
		return "", fmt.Errorf("git commit %q is not a commit hash", version)
	case module.KindOCI.String():
		d, err := digest.Parse(version)
		if err != nil {
			return "", fmt.Errorf("OCI module version %q: %w", version, err)
		}
		// Not ALG-HEX: registries without the referrers API keep a manifest's referrers under
		// that tag (the referrers tag schema).
		return "oci-" + d.Algorithm().String() + "-" + d.Encoded(), nil
	default:
		return "zh-" + strings.TrimPrefix(zh, "zh:"), nil
	}
}

// moduleAnnotations are a module package's provenance: its package's source address (the full
// address of each call is in the listing), version, the origin's own checksum.
func moduleAnnotations(pkgSource, kind, version, originChecksum string) map[string]string {
	a := map[string]string{modulepkg.AnnotationSource: pkgSource}
	if version != "" {
		a[modulepkg.AnnotationVersion] = version
	}
	if originChecksum != "" {
		a[modulepkg.AnnotationOriginChecksum] = originChecksum
	}
	if kind == module.KindRegistry.String() {
		a[ocispec.AnnotationVersion] = version
	}
	return a
}

// checkResolved checks one resolved module before it goes into a bundle: its zip unpacks safely
// (no "../", absolute name, link or bomb) and hashes to what the walk said, and the module lock,
// when it has the call, records the same source, version and both hashes. Errors name the call
// (file and line), its source and both hashes.
func checkResolved(r *module.Resolved, lock *module.Lock) (string, error) {
	at := fmt.Sprintf("module call %s (%s), source %s", r.Call, r.Where(), r.Source)
	h1, zh, err := modulepkg.Hashes(r.Zip)
	if err != nil {
		return "", fmt.Errorf("%s: %w", at, err)
	}
	if h1 != r.H1 || zh != r.ZH {
		return "", fmt.Errorf("%s: its package hashes to %s %s, not the %s %s it was resolved with", at, h1, zh, r.H1, r.ZH)
	}
	if err := checkModuleZip(r.Zip); err != nil {
		return "", fmt.Errorf("%s: %w (nothing was written)", at, err)
	}
	if lock == nil || lock.Entries[r.Key] == nil {
		return "resolved: the module lock has no entry for it (run 'oprov lock' to pin it)", nil
	}
	e := lock.Entries[r.Key]
	if e.Source != r.Source || e.Version != r.Version {
		return "", fmt.Errorf("%s: the module lock records %s %s, the configuration resolves %s %s: run 'oprov lock -upgrade'", at, e.Source, e.Version, r.Source, r.Version)
	}
	if !slices.Contains(e.Hashes, h1) || !slices.Contains(e.Hashes, zh) {
		return "", fmt.Errorf("%s: the package hashes to %s %s, the module lock records %s: the module changed since it was locked", at, h1, zh, strings.Join(e.Hashes, " "))
	}
	return "module lock", nil
}

// saveModules puts every remote module of the configuration into the tarball as a module
// package, each checked first (checkResolved), one package for calls that share it; with a
// base, a package the base holds stays out, tag and all. It lists each call.
func saveModules(ctx context.Context, tl *tarLayout, opts ConfigOptions, base map[digest.Digest]bool, listing *Listing) (changed int, err error) {
	done := map[string]string{} // repository:tag -> manifest digest
	for _, r := range opts.Modules {
		from, err := checkResolved(r, opts.ModuleLock)
		if err != nil {
			return 0, err
		}
		m, err := putModule(ctx, tl, r, base, done, opts.Registry)
		if err != nil {
			return 0, fmt.Errorf("module call %s (%s), source %s: %w", r.Call, r.Where(), r.Source, err)
		}
		m.VersionFrom = from
		if m.InBundle {
			changed++
		}
		listing.Modules = append(listing.Modules, *m)
	}
	return changed, nil
}

// ModuleRef is where a loaded bundle keeps a module below prefix (load's --to): the repository its
// source address gives and the tag its locked version (or, for an HTTP archive, its zh: hash)
// gives, as save wrote them.
func ModuleRef(prefix, source, version, zh string) (ociref.Ref, error) {
	src, err := module.ParseSource(source)
	if err != nil {
		return ociref.Ref{}, err
	}
	repo, err := moduleRepository(source)
	if err != nil {
		return ociref.Ref{}, err
	}
	tag, err := moduleTag(src.Kind.String(), version, zh)
	if err != nil {
		return ociref.Ref{}, err
	}
	return ociref.ParseRef(strings.TrimSuffix(prefix, "/") + "/" + repo + ":" + tag)
}

// putModule writes one module package into the tarball (unless done or the base holds it) and
// gives its listing entry, VersionFrom left to the caller.
func putModule(ctx context.Context, tl *tarLayout, r *module.Resolved, base map[digest.Digest]bool, done map[string]string, reg *ociref.Client) (*ListedModule, error) {
	src, err := module.ParseSource(r.Source)
	if err != nil {
		return nil, err
	}
	repo, err := moduleRepository(r.Source)
	if err != nil {
		return nil, err
	}
	tag, err := moduleTag(src.Kind.String(), r.Version, r.ZH)
	if err != nil {
		return nil, err
	}
	ann := moduleAnnotations(src.Package(), src.Kind.String(), r.Version, r.OriginChecksum)
	desc, _, err := modulepkg.Build(r.Zip, ann)
	if src.Kind == module.KindOCI { // the original package, whose digest is its version
		desc.Digest, err = digest.Parse(r.Version)
	}
	if err != nil {
		return nil, err
	}
	m := &ListedModule{Call: r.Call, Key: r.Key, Source: r.Source, Kind: src.Kind.String(), Version: r.Version,
		OriginChecksum: r.OriginChecksum, Repository: repo, Tag: tag, Manifest: desc.Digest.String(), H1: r.H1, ZH: r.ZH,
		InBundle: !base[desc.Digest]}
	name := repo + ":" + tag
	if prev, ok := done[name]; ok {
		if prev != m.Manifest {
			return nil, fmt.Errorf("%s would hold two packages (%s and %s): two calls name the same package with different contents", name, prev, m.Manifest)
		}
		return m, nil
	}
	done[name] = m.Manifest
	if !m.InBundle {
		return m, nil
	}
	if src.Kind == module.KindOCI {
		return m, copyOCIModule(ctx, tl, r, src, repo, tag, reg)
	}
	if _, err := modulepkg.Push(ctx, tl, r.Zip, name, ann); err != nil {
		return nil, err
	}
	return m, nil
}

// copyOCIModule copies an oci:// module's own package into the tarball, by the digest the walk
// resolved, with its referrers and cosign .sig manifest (its signatures travel), after checking
// that it is a module package whose zip is the one the walk hashed.
func copyOCIModule(ctx context.Context, tl *tarLayout, r *module.Resolved, src module.Source, repo, tag string, reg *ociref.Client) error {
	ref, err := ociref.ParseRef(src.URL)
	if err != nil {
		return err
	}
	from, err := reg.Open(ctx, ref, false)
	if err != nil {
		return ociref.Explain("save", ref, err)
	}
	res, err := modulepkg.Resolve(ctx, from, r.Version)
	if err != nil {
		return err
	}
	if got, want := res.Layer().Digest.Encoded(), strings.TrimPrefix(r.ZH, "zh:"); got != want {
		return fmt.Errorf("%s@%s holds the zip sha256:%s, not the %s the module walk hashed", src.URL, r.Version, got, r.ZH)
	}
	var found []ocispec.Descriptor
	_, err = artifactcopy.Copy(ctx, from, tl, []string{r.Version}, artifactcopy.Options{
		SizesOnly: true, // the tarball hashes each blob as it goes in
		DstTag: func(t string) string {
			if t == r.Version {
				return repo + ":" + tag
			}
			return repo + ":" + t // the .sig tag
		},
		Referrer: func(d ocispec.Descriptor) { found = append(found, d) },
	})
	if err != nil {
		return ociref.Explain("save", ref, err)
	}
	return recordReferrers(ctx, tl, repo, found)
}

// PrintedModule is one loaded module call and the oci:// source address of its package below a
// load's destination (what `tofu init` reads with `source = "oci://..."`, and oprov installs from).
type PrintedModule struct {
	Call      string `json:"call"`
	Source    string `json:"source"`
	Version   string `json:"version,omitempty"`
	OCISource string `json:"oci_source"`
}

// ModuleSources are the listing's module calls with the oci:// address of each package below to,
// by digest (what load checked), the subdirectory kept.
func (l *Listing) ModuleSources(to string) []PrintedModule {
	var out []PrintedModule
	for _, m := range l.Modules {
		addr := "oci://" + strings.TrimSuffix(to, "/") + "/" + m.Repository
		if s, err := module.ParseSource(m.Source); err == nil && s.Subdir != "" {
			addr += "//" + s.Subdir
		}
		out = append(out, PrintedModule{Call: m.Call, Source: m.Source, Version: m.Version, OCISource: addr + "?digest=" + m.Manifest})
	}
	return out
}

// ModuleServeArgs are the `oprov serve` arguments that answer the Module Registry Protocol for
// the listing's registry modules from below to: one --modules template a module hostname (a
// hostname with a port cannot go through ${hostname}), with the --module-include that selects it.
func (l *Listing) ModuleServeArgs(to string) [][]string {
	hosts := map[string]bool{}
	var out [][]string
	for _, m := range l.Modules {
		s, err := module.ParseSource(m.Source)
		if err != nil || s.Kind != module.KindRegistry || hosts[s.Registry.Host.String()] {
			continue
		}
		h := s.Registry.Host.String()
		hosts[h] = true
		out = append(out, []string{"--modules", strings.TrimSuffix(to, "/") + "/modules/" + repoPart(h) + "/${namespace}/${name}/${system}",
			"--module-include", h + "/*/*/*"})
	}
	return out
}

// checkModuleZip refuses a module zip that would not unpack safely (an escaping or absolute
// name, a link, a name twice, a bomb), as modulepkg.Unpack would, without writing it out; the
// hashes read every entry in full.
func checkModuleZip(z []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return fmt.Errorf("the module package is not a valid zip: %w", err)
	}
	return unzip.CheckEntries(zr, modulepkg.DefaultLimits)
}
