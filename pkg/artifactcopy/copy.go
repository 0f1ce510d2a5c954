// Package artifactcopy copies provider versions between OCI repositories, layouts and tarballs with
// everything that refers to them (referrers and cosign's .sig tags), and reads every blob of a
// version back against its digest.
package artifactcopy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
)

// Options tune a copy.
type Options struct {
	Concurrency int
	Limits      oci.Limits // what the source may serve
	Progress    oci.Progress
	// DstTag maps a source tag to the destination's tag name (default: the same).
	DstTag func(tag string) string
	// Referrer, when set, hears of each referrer the copy found (and so copied).
	Referrer func(ocispec.Descriptor)
	// SizesOnly checks only the size of what the source sends, not its digest: for a source
	// whose blobs were just checked (VerifyAll) or a destination that hashes what it writes
	// (a bundle's tarball), so that nothing is hashed twice.
	SizesOnly bool
}

// Result tells what a copy did.
type Result struct {
	Tags     []string `json:"tags"`
	Uploaded int64    `json:"uploaded"`
	Skipped  int64    `json:"skipped"`
	Bytes    int64    `json:"bytes_uploaded"`
}

// SelectTags picks a source's version tags: the one named, those meeting a constraint, or all.
func SelectTags(ctx context.Context, src oci.ReadOnly, version, constraint string, all bool, l oci.Limits) ([]string, error) {
	if version != "" {
		return []string{version}, nil
	}
	vs, err := artifact.ListVersions(ctx, src, l)
	if err != nil {
		return nil, err
	}
	set, err := manifest.Constraints(constraint)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := len(vs) - 1; i >= 0; i-- { // oldest first
		if all || set.Has(vs[i].Version) {
			out = append(out, vs[i].Tag)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no version meets %q", constraint)
	}
	return out, nil
}

// Pending is a tag a copy has yet to write: everything under it is in the destination.
type Pending struct {
	Desc ocispec.Descriptor
	Tag  string // the destination's tag name
}

// Copy copies tagged versions with everything that refers to them: OCI referrers (oprov and
// cosign signature bundles, SBOMs, SHA256SUMS provenance, found through the referrers API or its
// tag fallback) and cosign's legacy sha256-<hex>.sig tags, which referrer-aware copies drop.
// Content the destination has is not sent again, so a copy cut short resumes where it stopped.
// No tag moves until every version's whole graph, referrers and .sig manifest are there; then
// each .sig tag is written before its version's tag (see CopyContent and ApplyTags).
func Copy(ctx context.Context, src oci.ReadOnly, dst oras.GraphTarget, tags []string, opts Options) (*Result, error) {
	res, pending, err := CopyContent(ctx, src, dst, tags, opts)
	if err != nil {
		return nil, err
	}
	if err := ApplyTags(ctx, dst, pending); err != nil {
		return nil, err
	}
	return res, nil
}

// CopyContent copies what Copy copies and tags nothing: it gives the tags to write, each
// version's .sig tag before the version's own. Every blob read from src is checked against its
// descriptor as it streams (oci.VerifyReader), whatever dst checks.
func CopyContent(ctx context.Context, src oci.ReadOnly, dst oras.GraphTarget, tags []string, opts Options) (*Result, []Pending, error) {
	res := &Result{}
	var uploaded, skipped, bytes atomic.Int64
	gopts := oras.ExtendedCopyGraphOptions{CopyGraphOptions: oras.CopyGraphOptions{
		Concurrency: opts.Concurrency,
		PreCopy: func(ctx context.Context, d ocispec.Descriptor) error {
			if err := checkBlobSize(opts.Limits, d); err != nil {
				return err
			}
			if opts.Progress != nil {
				opts.Progress.Plan(d.Size)
			}
			return nil
		},
		PostCopy: func(_ context.Context, d ocispec.Descriptor) error {
			uploaded.Add(1)
			bytes.Add(d.Size)
			return nil
		},
		OnCopySkipped: func(context.Context, ocispec.Descriptor) error { skipped.Add(1); return nil },
	}}
	if opts.Referrer != nil {
		gopts.FindPredecessors = func(ctx context.Context, src content.ReadOnlyGraphStorage, d ocispec.Descriptor) ([]ocispec.Descriptor, error) {
			preds, err := src.Predecessors(ctx, d)
			for _, p := range preds {
				opts.Referrer(p)
			}
			return preds, err
		}
	}
	if opts.Progress != nil {
		dst = progressDestination{dst, opts.Progress}
	}
	dstTag := opts.DstTag
	if dstTag == nil {
		dstTag = func(t string) string { return t }
	}
	checked := verifyingSource{ReadOnly: src, from: oci.SenderOf(src), refused: &atomic.Pointer[oci.BlobError]{}, sizesOnly: opts.SizesOnly}
	var pending []Pending
	for _, tag := range tags {
		desc, err := src.Resolve(ctx, tag)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", tag, err)
		}
		if err := oras.ExtendedCopyGraph(ctx, checked, dst, desc, gopts); err != nil {
			return nil, nil, fmt.Errorf("copying %s: %w", tag, checked.explain(err))
		}
		// cosign v2's signatures live under a tag of their own.
		sigTag := manifest.CosignSignatureTag(desc.Digest)
		sig, err := src.Resolve(ctx, sigTag)
		switch {
		case errors.Is(err, errdef.ErrNotFound):
		case err != nil:
			return nil, nil, fmt.Errorf("%s: %w", sigTag, err)
		default:
			if err := oras.CopyGraph(ctx, checked, dst, sig, gopts.CopyGraphOptions); err != nil {
				return nil, nil, fmt.Errorf("copying %s: %w", sigTag, checked.explain(err))
			}
			pending = append(pending, Pending{Desc: sig, Tag: dstTag(sigTag)})
		}
		pending = append(pending, Pending{Desc: desc, Tag: dstTag(tag)})
		res.Tags = append(res.Tags, tag)
	}
	res.Uploaded, res.Skipped, res.Bytes = uploaded.Load(), skipped.Load(), bytes.Load()
	return res, pending, nil
}

// ApplyTags writes the tags CopyContent left, in its order.
func ApplyTags(ctx context.Context, dst interface {
	Tag(context.Context, ocispec.Descriptor, string) error
}, pending []Pending) error {
	for _, p := range pending {
		if err := dst.Tag(ctx, p.Desc, p.Tag); err != nil {
			return fmt.Errorf("tagging %s: %w", p.Tag, err)
		}
	}
	return nil
}

// verifyingSource checks every blob a copy reads against its descriptor, so a source that sends
// more, fewer or other bytes is refused naming the blob, what it declared and what arrived.
type verifyingSource struct {
	oci.ReadOnly
	from      string
	refused   *atomic.Pointer[oci.BlobError] // the first blob refused
	sizesOnly bool
}

func (s verifyingSource) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := s.ReadOnly.Fetch(ctx, d)
	if err != nil {
		return nil, err
	}
	check := oci.NewVerifyReader
	if s.sizesOnly {
		check = oci.NewSizeReader
	}
	return struct {
		io.Reader
		io.Closer
	}{recordRefusal{check(rc, d, s.from), s.refused}, rc}, nil
}

// explain gives the refusal of a blob behind a copy's error: a destination that checks what it
// reads as well (a layout) reports only its own "trailing data".
func (s verifyingSource) explain(err error) error {
	var be *oci.BlobError
	if r := s.refused.Load(); r != nil && !errors.As(err, &be) {
		return r
	}
	return err
}

type recordRefusal struct {
	r       io.Reader
	refused *atomic.Pointer[oci.BlobError]
}

func (r recordRefusal) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	var be *oci.BlobError
	if errors.As(err, &be) {
		r.refused.CompareAndSwap(nil, be)
	}
	return n, err
}

// progressDestination reports the bytes of every push as they are read, so a copy's progress
// moves with its bytes rather than a blob at a time.
type progressDestination struct {
	oras.GraphTarget
	p oci.Progress
}

func (d progressDestination) Push(ctx context.Context, desc ocispec.Descriptor, r io.Reader) error {
	return d.GraphTarget.Push(ctx, desc, oci.ProgressReader(r, d.p))
}

// VerifyAll reads every blob reachable from the given tags, their referrers and their cosign
// .sig tags (everything Copy would copy), checking each against its descriptor, without writing
// anything.
func VerifyAll(ctx context.Context, src oci.ReadOnly, tags []string, l oci.Limits) (int, error) {
	seen := map[string]bool{}
	from := oci.SenderOf(src)
	var walk func(d ocispec.Descriptor) error
	walk = func(d ocispec.Descriptor) error {
		if seen[d.Digest.String()] {
			return nil
		}
		seen[d.Digest.String()] = true
		if err := checkBlobSize(l, d); err != nil {
			return err
		}
		rc, err := src.Fetch(ctx, d)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Digest, err)
		}
		err = oci.NewVerifyReader(iox.ContextReader(ctx, rc), d, from).Verify()
		rc.Close()
		if err != nil {
			return fmt.Errorf("%s (%s) is corrupt: %w", d.Digest, d.MediaType, err)
		}
		succ, err := content.Successors(ctx, src, d)
		if err != nil {
			return err
		}
		preds, err := src.Predecessors(ctx, d)
		if err != nil {
			return err
		}
		for _, s := range append(succ, preds...) {
			if err := walk(s); err != nil {
				return err
			}
		}
		return nil
	}
	for _, tag := range tags {
		d, err := src.Resolve(ctx, tag)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", tag, err)
		}
		if err := walk(d); err != nil {
			return 0, err
		}
		sigTag := manifest.CosignSignatureTag(d.Digest)
		sig, err := src.Resolve(ctx, sigTag)
		switch {
		case errors.Is(err, errdef.ErrNotFound):
		case err != nil:
			return 0, fmt.Errorf("%s: %w", sigTag, err)
		default:
			if err := walk(sig); err != nil {
				return 0, fmt.Errorf("%s: %w", sigTag, err)
			}
		}
	}
	return len(seen), nil
}

// checkBlobSize refuses, before it is fetched, a blob whose descriptor is over the maximum
// package size (manifests have their own, smaller limit in oras-go).
func checkBlobSize(l oci.Limits, d ocispec.Descriptor) error {
	return l.WithDefaults().CheckBlobSize(fmt.Sprintf("blob %s (%s)", d.Digest, d.MediaType), d.Size)
}
