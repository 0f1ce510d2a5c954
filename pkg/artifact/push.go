package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/errdef"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// PushOptions tunes a push.
type PushOptions struct {
	Concurrency int
	Progress    oci.Progress
	Index       manifest.IndexOptions
}

// PushResult tells what a push did.
type PushResult struct {
	Index    ocispec.Descriptor
	Tag      string
	Built    *manifest.Built
	Uploaded int   // blobs and manifests uploaded
	Skipped  int   // blobs and manifests already there
	Bytes    int64 // bytes uploaded
	Retagged bool  // the tag was moved to this index (false when it already pointed here)
}

// PushRelease publishes a checked release to a target as one version: the zips and the config
// blob first, then the platform manifests, and the index last, under tag. Content already in the
// target is not uploaded again. Until the index is tagged, nothing a client resolves has changed.
func PushRelease(ctx context.Context, t oci.Target, rel *providerrelease.Release, tag string, opts PushOptions) (*PushResult, error) {
	// The index records its version, so a signature over it also says which version it signed.
	idxOpts := opts.Index
	idxOpts.Annotations = map[string]string{ocispec.AnnotationVersion: rel.Version}
	for k, v := range opts.Index.Annotations {
		idxOpts.Annotations[k] = v
	}
	built, err := manifest.Build(rel.Packages(), idxOpts)
	if err != nil {
		return nil, err
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = oci.DefaultConcurrency
	}
	res := &PushResult{Index: built.Index.Descriptor, Tag: tag, Built: built}
	c := &pushCounter{t: t, progress: opts.Progress}
	// Blobs (the shared empty config and every zip), then the platform manifests once every blob
	// they name is there.
	blobs := []pushItem{{manifest.EmptyConfig, oci.BytesOpener(manifest.EmptyConfigData)}}
	for _, a := range rel.Artifacts {
		blobs = append(blobs, pushItem{a.Package().LayerDescriptor(), fileOpener(a.Path, a.Package().LayerDescriptor().Size)})
	}
	var manifests []pushItem
	for _, m := range built.Manifests {
		manifests = append(manifests, pushItem{m.Descriptor, oci.BytesOpener(m.Data)})
	}
	for _, batch := range [][]pushItem{blobs, manifests} {
		if err := c.pushAll(ctx, batch, opts.Concurrency); err != nil {
			return nil, err
		}
	}
	// The index, and the tag: the one step clients see.
	idx := built.Index
	if cur, err := t.Resolve(ctx, tag); err == nil && cur.Digest == idx.Descriptor.Digest {
		c.skipped.Add(1)
	} else {
		if err != nil && !errors.Is(err, errdef.ErrNotFound) {
			return nil, err
		}
		res.Retagged = true
		if _, err := oras.TagBytes(ctx, t, idx.Descriptor.MediaType, idx.Data, tag); err != nil {
			return nil, err
		}
		c.uploaded.Add(1)
	}
	res.Uploaded, res.Skipped, res.Bytes = int(c.uploaded.Load()), int(c.skipped.Load()), c.bytes.Load()
	return res, nil
}

// pushItem is one piece of content to push, and how to read it.
type pushItem struct {
	desc ocispec.Descriptor
	open func() (io.ReadCloser, error)
}

// pushCounter pushes content a few at a time, counting what it uploaded and skipped.
type pushCounter struct {
	t                 oci.Target
	progress          oci.Progress
	uploaded, skipped atomic.Int64
	bytes             atomic.Int64
}

func (c *pushCounter) pushAll(ctx context.Context, items []pushItem, concurrency int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, it := range items {
		g.Go(func() error {
			pushed, err := oci.PushIfMissing(gctx, c.t, it.desc, it.open, c.progress)
			switch {
			case err != nil:
				return err
			case pushed:
				c.uploaded.Add(1)
				c.bytes.Add(it.desc.Size)
			default:
				c.skipped.Add(1)
			}
			return nil
		})
	}
	return g.Wait()
}

// fileOpener opens a checked file for upload. A file changed since it was checked would be
// refused by the registry's digest check; refusing here gives the clearer message.
func fileOpener(path string, size int64) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if st, err := f.Stat(); err == nil && st.Size() != size {
			f.Close()
			return nil, fmt.Errorf("%s changed size since it was checked", path)
		}
		return f, nil
	}
}
