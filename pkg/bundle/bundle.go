// Package bundle saves provider versions, with their referrers and cosign signatures, into one
// self-contained OCI-layout tarball, and loads such a tarball into a registry after checking
// every blob (and, with a policy, every signature) before anything is pushed.
package bundle

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content/oci"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/artifactcopy"
	ociref "github.com/oprov/oprov/pkg/oci"
)

// SaveItem is one repository's versions to save.
type SaveItem struct {
	Ref  ociref.Ref // the source repository (its tag, if any, names the version)
	Src  ociref.ReadOnly
	Tags []string
}

// SaveItemFor opens a reference's repository and picks what Save is to write of it: the version
// its tag names, or every version when it names none. Errors are explained for the "save"
// operation.
func SaveItemFor(ctx context.Context, ref ociref.Ref, reg *ociref.Client) (SaveItem, error) {
	t, err := reg.Open(ctx, ref.WithReference(""), false)
	if err != nil {
		return SaveItem{}, ociref.Explain("save", ref, err)
	}
	tags, err := artifactcopy.SelectTags(ctx, t, ref.Reference, "", ref.Reference == "", reg.Bounds())
	if err != nil {
		return SaveItem{}, ociref.Explain("save", ref, err)
	}
	return SaveItem{Ref: ref, Src: t, Tags: tags}, nil
}

// Save writes one OCI image-layout tarball holding the given versions with their referrers and
// cosign signatures. Inside it, each tag is named REPOSITORY:TAG (the repository path without the
// registry host), so Load can recreate the repositories under another registry. The layout is
// written straight into the tarball as the blobs stream in, each checked against its digest on
// the way (one pass: nothing is written twice), in an owned temporary directory beside out (see
// internal/scratch), and the tarball renamed when complete: a killed save leaves nothing that the next
// one there does not remove.
func Save(ctx context.Context, items []SaveItem, out string, opts artifactcopy.Options) (*artifactcopy.Result, error) {
	work, err := scratch.Beside(filepath.Dir(out))
	if err != nil {
		return nil, err
	}
	defer work.Release()
	total := &artifactcopy.Result{}
	err = work.WriteFile(out, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		layout, err := newTarLayout(ctx, bw)
		if err != nil {
			return err
		}
		for _, it := range items {
			repo := repoPath(it.Ref)
			o := opts
			o.SizesOnly = true // the tarball hashes each blob as it goes in
			o.DstTag = func(t string) string { return repo + ":" + t }
			var found []ocispec.Descriptor
			o.Referrer = func(d ocispec.Descriptor) { found = append(found, d) }
			r, err := artifactcopy.Copy(ctx, it.Src, layout, it.Tags, o)
			if err == nil {
				err = recordReferrers(ctx, layout, repo, found)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", it.Ref.Repo(), err)
			}
			for _, t := range r.Tags {
				total.Tags = append(total.Tags, repo+":"+t)
			}
			total.Uploaded += r.Uploaded
			total.Bytes += r.Bytes
		}
		if err := layout.Close(); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return nil, err
	}
	return total, nil
}

// referrerTagPrefix starts the tags (REPOSITORY:referrer.sha256-<hex>) that record, in a tarball,
// which referrers each repository had: repositories that share an index digest share its node in
// the layout, and so would otherwise get each other's signatures back on load.
const referrerTagPrefix = "referrer."

func recordReferrers(ctx context.Context, layout interface {
	Tag(context.Context, ocispec.Descriptor, string) error
}, repo string, found []ocispec.Descriptor) error {
	for _, d := range found {
		tag := repo + ":" + referrerTagPrefix + d.Digest.Algorithm().String() + "-" + d.Digest.Encoded()
		if err := layout.Tag(ctx, d, tag); err != nil {
			return fmt.Errorf("recording referrer %s: %w", d.Digest, err)
		}
	}
	return nil
}

// repoPath is the repository path saved in a tarball: the registry host is left out.
func repoPath(r ociref.Ref) string {
	if r.IsLayout() {
		return filepath.Base(filepath.Clean(r.Layout))
	}
	return r.Repository
}

// Bundle is an opened tarball.
type Bundle struct {
	store *oci.ReadOnlyStore
	// Repos maps each repository path to its tags (versions and .sig tags).
	Repos map[string][]string
	// referrers maps each repository path to the referrers it had when saved; nil for a tarball
	// that records none (an older one), whose repositories get every referrer it holds.
	referrers map[string]map[digest.Digest]bool
	// Listing is a configuration bundle's listing (nil for a tarball 'oprov save REF' wrote).
	Listing *Listing
}

// Open opens a tarball written by Save (or any OCI-layout tarball whose tags are named
// REPOSITORY:TAG), reading it in place.
func Open(ctx context.Context, path string, limits ociref.Limits) (*Bundle, error) {
	if err := checkTarball(ctx, path, limits.MaxPackageSize); err != nil {
		return nil, err
	}
	st, err := oci.NewFromTar(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI-layout tarball: %w", path, err)
	}
	b := &Bundle{store: st, Repos: map[string][]string{}}
	err = st.Tags(ctx, "", func(tags []string) error {
		for _, t := range tags {
			i := strings.LastIndex(t, ":")
			if i <= 0 {
				return fmt.Errorf("%s: tag %q does not name a repository (want REPOSITORY:TAG)", path, t)
			}
			repo, tag := t[:i], t[i+1:]
			if err := checkRepository(repo); err != nil {
				return fmt.Errorf("%s: tag %q: %w: loaded, it would be written outside --to or refused half-way", path, t, err)
			}
			if err := checkTag(repo, tag); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if rest, ok := strings.CutPrefix(tag, referrerTagPrefix); ok {
				b.recordReferrer(repo, rest)
				continue
			}
			b.Repos[repo] = append(b.Repos[repo], tag)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(b.Repos) == 0 {
		return nil, fmt.Errorf("%s holds no tagged versions", path)
	}
	switch l, err := readListingTar(path); {
	case err == nil:
		b.Listing = l
	case !errors.Is(err, errNoListing):
		return nil, err
	}
	return b, nil
}

// recordReferrer notes that repo had the referrer a tag names (sha256-<hex>).
func (b *Bundle) recordReferrer(repo, name string) {
	alg, hex, _ := strings.Cut(name, "-")
	if b.referrers == nil {
		b.referrers = map[string]map[digest.Digest]bool{}
	}
	if b.referrers[repo] == nil {
		b.referrers[repo] = map[digest.Digest]bool{}
	}
	b.referrers[repo][digest.NewDigestFromEncoded(digest.Algorithm(alg), hex)] = true
}

// Repo gives a read-only view of one repository in the bundle, with its own tag names and, when
// the tarball records them, exactly the referrers it had.
func (b *Bundle) Repo(repo string) ociref.ReadOnly {
	v := &repoView{ReadOnlyStore: b.store, prefix: repo + ":"}
	if b.referrers != nil {
		v.referrers = b.referrers[repo]
		if v.referrers == nil {
			v.referrers = map[digest.Digest]bool{}
		}
	}
	return v
}

type repoView struct {
	*oci.ReadOnlyStore
	prefix    string
	referrers map[digest.Digest]bool // nil: every predecessor in the tarball
}

// Predecessors gives what refers to node in this repository: only the referrers it had when saved,
// not those of other repositories that share the node.
func (r *repoView) Predecessors(ctx context.Context, node ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	preds, err := r.ReadOnlyStore.Predecessors(ctx, node)
	if err != nil || r.referrers == nil {
		return preds, err
	}
	var mine []ocispec.Descriptor
	for _, p := range preds {
		if r.referrers[p.Digest] {
			mine = append(mine, p)
		}
	}
	return mine, nil
}

// Sender names the bundle as where bytes come from, in errors.
func (r *repoView) Sender() string { return "the bundle" }

func (r *repoView) Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error) {
	if _, err := digest.Parse(ref); err == nil {
		return r.ReadOnlyStore.Resolve(ctx, ref)
	}
	d, err := r.ReadOnlyStore.Resolve(ctx, r.prefix+ref)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", ref, errdef.ErrNotFound)
	}
	return d, nil
}

func (r *repoView) Tags(ctx context.Context, last string, fn func([]string) error) error {
	return r.ReadOnlyStore.Tags(ctx, "", func(tags []string) error {
		var mine []string
		for _, t := range tags {
			if rest, ok := strings.CutPrefix(t, r.prefix); ok && rest > last && !strings.HasPrefix(rest, referrerTagPrefix) {
				mine = append(mine, rest)
			}
		}
		if len(mine) == 0 {
			return nil
		}
		return fn(mine)
	})
}

// deltaView reads a delta bundle's repository: the blobs its base had come from where the base
// was loaded.
type deltaView struct {
	ociref.ReadOnly
	base    ociref.ReadOnly
	omitted map[digest.Digest]bool
}

func (v *deltaView) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	if v.omitted[d.Digest] {
		rc, err := v.base.Fetch(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("this delta bundle leaves %s to its base, which is not loaded where it goes: load the base first (%w)", d.Digest, err)
		}
		// Exactly the descriptor's bytes (checked against its digest by whoever reads them):
		// the registry's reader of a tiny blob can run on past it.
		return struct {
			io.Reader
			io.Closer
		}{io.LimitReader(rc, d.Size), rc}, nil
	}
	return v.ReadOnly.Fetch(ctx, d)
}

func (v *deltaView) Sender() string {
	return "the bundle (or, for a blob it leaves to its base, the registry it is loaded into)"
}

func (v *deltaView) Exists(ctx context.Context, d ocispec.Descriptor) (bool, error) {
	if v.omitted[d.Digest] {
		return v.base.Exists(ctx, d)
	}
	return v.ReadOnly.Exists(ctx, d)
}
