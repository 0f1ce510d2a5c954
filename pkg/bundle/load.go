package bundle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/artifactcopy"
	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/origin"
	"github.com/oprov/oprov/pkg/sign"
)

// LoadOptions say where a bundle goes and what must hold first.
type LoadOptions struct {
	To       string // HOST[:PORT][/PREFIX]: each repository is recreated below it
	Registry *ociref.Client
	Policy   *sign.Policy // when set, every version's signature must satisfy it
	Copy     artifactcopy.Options
	Log      io.Writer
}

// Loaded is one repository a load wrote.
type Loaded struct {
	Repository string               `json:"repository"`
	Result     *artifactcopy.Result `json:"result"`
}

// LoadReport is what a load wrote and what it proved.
type LoadReport struct {
	Loaded []Loaded
	// Printable holds the listing's providers a configuration may name: those the bundle holds
	// (or, for a delta, the destination already holds as listed) whose digests load checked and,
	// with a policy, whose signatures it verified. nil for a tarball without a listing.
	Printable *Listing
	// Left says which listed providers Printable leaves out, and why.
	Left []string
}

// load is one Load's state: the bundle's repositories, each one's view and version tags, and the
// provider address the (checked) listing gives each.
type load struct {
	b        *Bundle
	opts     LoadOptions
	repos    []string
	views    map[string]ociref.ReadOnly
	versions map[string][]string
	addrs    map[string]string // repository -> provider address, from the checked listing
	// printMods are the listed modules checked (or found where a delta's base was loaded).
	printMods []ListedModule
}

// Load pushes a bundle's repositories below opts.To, all or nothing. Before the first byte is
// pushed: the listing is checked against what the bundle holds (a listing that names what the
// bundle does not hold refuses the load), every blob, manifest, referrer and cosign .sig
// manifest is read and checked against its digest and size, and, with a policy, every version's
// signature is verified (cosign signatures, or an origin's signed SHA256SUMS under a rule with
// origin_keys). Then all content is pushed, and only then are tags written, each .sig tag before
// its version's.
func Load(ctx context.Context, b *Bundle, opts LoadOptions) (*LoadReport, error) {
	if opts.Registry == nil {
		opts.Registry = ociref.NewClient(ociref.Options{})
	}
	l := &load{b: b, opts: opts, views: map[string]ociref.ReadOnly{}, versions: map[string][]string{}}
	modRepos := b.Listing.moduleRepos()
	for r := range b.Repos {
		if !modRepos[r] { // module packages are checked and pushed apart (checkModules)
			l.repos = append(l.repos, r)
		}
	}
	sort.Strings(l.repos)
	var err error
	if l.addrs, err = b.checkListing(ctx); err != nil {
		return nil, fmt.Errorf("%w; nothing was pushed", err)
	}
	if err := l.openViews(ctx); err != nil {
		return nil, err
	}
	trusted, warnings, err := l.verify(ctx)
	if err != nil {
		return nil, fmt.Errorf("nothing was pushed: %w", err)
	}
	report := &LoadReport{}
	mods, err := l.checkModules(ctx, report)
	if err != nil {
		return nil, err
	}
	base, err := l.checkBase(ctx, report)
	if err != nil {
		return nil, err
	}
	if report.Loaded, err = l.push(ctx, mods); err != nil {
		return nil, err
	}
	l.printable(report, trusted, warnings, base)
	return report, nil
}

func (l *load) dstRef(repo string) (ociref.Ref, error) {
	r, err := ociref.ParseRef(strings.TrimSuffix(l.opts.To, "/") + "/" + repo)
	if err != nil {
		return ociref.Ref{}, fmt.Errorf("--to %s: %w", l.opts.To, err)
	}
	return r, nil
}

// openViews gives each repository its view (a delta's reads the blobs its base had from where
// the base was loaded) and checks every blob its versions reach, .sig manifests included.
func (l *load) openViews(ctx context.Context) error {
	omitted := map[digest.Digest]bool{}
	if l.b.Listing != nil {
		for _, d := range l.b.Listing.Omitted {
			omitted[digest.Digest(d)] = true
		}
	}
	for _, repo := range l.repos {
		ref, err := l.dstRef(repo)
		if err != nil {
			return err
		}
		v := l.b.Repo(repo)
		if len(omitted) > 0 {
			dst, err := l.opts.Registry.Open(ctx, ref, false)
			if err != nil {
				return ociref.Explain("load", ref, err)
			}
			v = &deltaView{ReadOnly: v, base: dst, omitted: omitted}
		}
		l.views[repo] = v
		for _, t := range l.b.Repos[repo] {
			if _, err := manifest.TagToVersion(t); err == nil {
				l.versions[repo] = append(l.versions[repo], t)
			}
		}
		if len(l.versions[repo]) == 0 {
			continue
		}
		if _, err := artifactcopy.VerifyAll(ctx, v, l.versions[repo], l.opts.Registry.Bounds()); err != nil {
			return fmt.Errorf("the bundle is damaged, so nothing was pushed: %s: %w", repo, err)
		}
	}
	return nil
}

// verify checks every version's signature under the policy, if there is one. It gives the
// versions verified (REPO:TAG), and the warnings of those a warn-mode rule let through.
func (l *load) verify(ctx context.Context) (map[string]bool, map[string]error, error) {
	if l.opts.Policy == nil {
		return nil, nil, nil
	}
	trusted, warnings := map[string]bool{}, map[string]error{}
	for _, repo := range l.repos {
		for _, t := range l.versions[repo] {
			ref, err := l.dstRef(repo)
			if err != nil {
				return nil, nil, err
			}
			ref.Reference = t
			warn, err := verifyVersion(ctx, l.opts.Policy, l.views[repo], ref, l.addrs[repo], l.opts.Registry.Bounds())
			if err != nil {
				return nil, nil, err
			}
			if warn != nil {
				warnings[repo+":"+t] = warn
				if l.opts.Log != nil {
					fmt.Fprintf(l.opts.Log, "oprov: warning (policy mode warn): %v\n", warn)
				}
				continue
			}
			trusted[repo+":"+t] = true
		}
	}
	return trusted, warnings, nil
}

// verifyVersion verifies one version under a policy: by its origin's signed SHA256SUMS where the
// matching rule names origin_keys and the version carries that evidence, else (or when that
// fails and the rule has keys or identities) by its cosign signatures. A warn-mode failure is
// returned as the warning.
func verifyVersion(ctx context.Context, p *sign.Policy, t ociref.ReadOnly, ref ociref.Ref, provider string, limits ociref.Limits) (warning, err error) {
	v, err := artifact.ResolveVersion(ctx, t, ref, limits)
	if err != nil {
		return nil, err
	}
	rule := p.Match(ref.Repo(), provider)
	if rule != nil && len(rule.OriginKeys) > 0 {
		_, oerr := origin.VerifyEvidence(ctx, t, v, rule.OriginKeys)
		if oerr == nil {
			return nil, nil
		}
		if len(rule.Keys)+len(rule.Identities) == 0 || !errors.Is(oerr, origin.ErrNoEvidence) {
			what := "its"
			if provider != "" {
				what = provider + "'s"
			}
			err := &sign.Error{Ref: ref, Digest: v.Index.Digest, Reason: fmt.Sprintf("trust %q: %s origin SHA256SUMS evidence: %v", rule.Name, what, oerr)}
			if rule.Mode == sign.ModeWarn {
				return err, nil
			}
			return nil, err
		}
	}
	d, err := p.Check(ctx, t, ref, v, provider, sign.VerifyOptions{Limits: limits})
	if err != nil {
		if hasOriginEvidence(ctx, t, v) {
			return nil, fmt.Errorf("%w (it carries its origin's OpenPGP-signed SHA256SUMS: a --policy trust rule matching it with origin_keys = [the signing key's fingerprint] accepts that)", err)
		}
		return nil, err
	}
	return d.Warning, nil
}

func hasOriginEvidence(ctx context.Context, t ociref.ReadOnly, v *artifact.Version) bool {
	refs, err := registry.Referrers(ctx, t, v.Index, origin.ArtifactTypeChecksums)
	return err == nil && len(refs) > 0
}

// push copies every repository's content, tagging nothing, and then writes every tag (each .sig
// tag before its version's): a failure before the tags leaves no version tagged.
func (l *load) push(ctx context.Context, mods []*loadModule) ([]Loaded, error) {
	type dest struct {
		ref     ociref.Ref
		dst     ociref.Target
		res     *artifactcopy.Result
		pending []artifactcopy.Pending
	}
	var dests []dest
	for _, repo := range l.repos {
		if len(l.versions[repo]) == 0 {
			continue
		}
		ref, err := l.dstRef(repo)
		if err != nil {
			return nil, err
		}
		dst, err := l.openDst(ctx, repo, ref)
		if err != nil {
			return nil, ociref.Explain("load", ref, err)
		}
		copts := l.opts.Copy
		copts.SizesOnly = true // openViews read every blob against its digest; the registry hashes them again
		res, pending, err := artifactcopy.CopyContent(ctx, l.views[repo], dst, l.versions[repo], copts)
		if err != nil {
			return nil, fmt.Errorf("%w (no tag was written)", ociref.Explain("load", ref, err))
		}
		dests = append(dests, dest{ref, dst, res, pending})
	}
	loadedMods, err := l.pushModules(ctx, mods)
	if err != nil {
		return nil, err
	}
	var out []Loaded
	for _, d := range dests {
		if err := artifactcopy.ApplyTags(ctx, d.dst, d.pending); err != nil {
			return out, ociref.Explain("load", d.ref, err)
		}
		out = append(out, Loaded{Repository: d.ref.Repo(), Result: d.res})
	}
	if err := l.tagModules(ctx, mods); err != nil {
		return out, err
	}
	return append(out, loadedMods...), nil
}
