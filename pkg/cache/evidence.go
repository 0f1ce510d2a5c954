package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
)

// The cache keeps evidence, never verdicts. What a version's check read from its registry (the
// index, the platform manifests, every signature artifact: cosign .sig manifests, bundles,
// simple-signing payloads with their certificates, timestamps and Rekor entries) is stored by
// digest under evidence/blobs/, and where it was found (what a tag named, which referrers a
// subject had) under evidence/refs/. A later command opens the same repository through Evidence
// and runs the very same checks against it, offline, under the policy as it is then: the bytes
// are checked against their digests as they are read, and the records of where things were can
// only point at other content-addressed bytes, which must verify on their own. So whoever can
// write the cache can make a check fail, never pass.

// maxEvidenceBlob bounds one piece of evidence: manifests and signature artifacts are small.
const maxEvidenceBlob = 4 << 20

func (c *Cache) evidenceBlobPath(d digest.Digest) string {
	return filepath.Join(c.Dir, "evidence", "blobs", string(d.Algorithm()), d.Encoded())
}

// evidenceRefPath is where a repository's record of a tag (or of a subject's referrers) lives.
func (c *Cache) evidenceRefPath(repo oci.Ref, kind, name string) string {
	safe := strings.NewReplacer(":", "_").Replace(repo.Registry)
	return filepath.Join(c.Dir, "evidence", "refs", safe, filepath.FromSlash(repo.Repository), kind, name+".json")
}

// putEvidence stores one piece of evidence under its digest, unless it is there.
func (c *Cache) putEvidence(d digest.Digest, data []byte) error {
	if d.Validate() != nil || d.Algorithm() != digest.SHA256 || digest.FromBytes(data) != d {
		return fmt.Errorf("evidence %s does not match its digest", d)
	}
	p := c.evidenceBlobPath(d)
	if st, err := os.Stat(p); err == nil && st.Size() == int64(len(data)) {
		return nil
	}
	return c.writeFile(p, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// readEvidence reads one piece of evidence, checked against its descriptor.
func (c *Cache) readEvidence(desc ocispec.Descriptor) ([]byte, error) {
	if desc.Size < 0 || desc.Size > maxEvidenceBlob || desc.Digest.Validate() != nil {
		return nil, fmt.Errorf("evidence %s: %w", desc.Digest, errdef.ErrNotFound)
	}
	f, err := os.Open(c.evidenceBlobPath(desc.Digest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("evidence %s: %w", desc.Digest, errdef.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, desc.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != desc.Size || digest.FromBytes(data) != desc.Digest {
		// Changed on disk: as good as missing, so the check goes to the registry, or fails offline.
		return nil, fmt.Errorf("cached evidence %s %w: %w", desc.Digest, ErrDamaged, errdef.ErrNotFound)
	}
	return data, nil
}

func (c *Cache) writeRecord(p string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.writeFile(p, func(w io.Writer) error { _, err := w.Write(data); return err })
}

func readRecord(p string, v any) bool {
	data, err := readSmall(p)
	return err == nil && json.Unmarshal(data, v) == nil
}

// readSmall reads a file of the cache that is never larger than one piece of evidence, reading no
// more than that however large the file on disk is.
func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEvidenceBlob+1))
	if err == nil && len(data) > maxEvidenceBlob {
		return nil, fmt.Errorf("%s is over %d bytes", p, maxEvidenceBlob)
	}
	return data, err
}

// Evidence is repo as this cache saw it: a read-only target that answers, offline, from the
// evidence stored by Recording. What it does not hold it reports as not found.
func (c *Cache) Evidence(repo oci.Ref) oci.ReadOnly {
	c.markUsed(filepath.Join(c.Dir, "evidence"))
	return &evidenceStore{c: c, repo: repo}
}

type evidenceStore struct {
	c    *Cache
	repo oci.Ref
}

func (e *evidenceStore) Fetch(_ context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	data, err := e.c.readEvidence(desc)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (e *evidenceStore) Exists(_ context.Context, desc ocispec.Descriptor) (bool, error) {
	_, err := e.c.readEvidence(desc)
	return err == nil, nil
}

// Resolve answers a tag from the record of what it named when last seen; a digest from the blob.
func (e *evidenceStore) Resolve(_ context.Context, reference string) (ocispec.Descriptor, error) {
	if d, err := digest.Parse(reference); err == nil {
		if data, err := readSmall(e.c.evidenceBlobPath(d)); err == nil && digest.FromBytes(data) == d {
			return ocispec.Descriptor{MediaType: sniffMediaType(data, ocispec.MediaTypeImageManifest), Digest: d, Size: int64(len(data))}, nil
		}
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", reference, errdef.ErrNotFound)
	}
	var desc ocispec.Descriptor
	if !validTag(reference) || !readRecord(e.c.evidenceRefPath(e.repo, "tags", reference), &desc) {
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", reference, errdef.ErrNotFound)
	}
	return desc, nil
}

// sniffMediaType reads a manifest's own mediaType field.
func sniffMediaType(data []byte, dflt string) string {
	var m struct {
		MediaType string `json:"mediaType"`
	}
	if json.Unmarshal(data, &m) == nil && m.MediaType != "" {
		return m.MediaType
	}
	return dflt
}

// Referrers lists the referrers of desc recorded when they were last listed.
func (e *evidenceStore) Referrers(_ context.Context, desc ocispec.Descriptor, artifactType string, fn func([]ocispec.Descriptor) error) error {
	var list []ocispec.Descriptor
	if !readRecord(e.c.evidenceRefPath(e.repo, "referrers", desc.Digest.Encoded()), &list) {
		return fmt.Errorf("referrers of %s: %w", desc.Digest, errdef.ErrNotFound)
	}
	var out []ocispec.Descriptor
	for _, d := range list {
		if artifactType == "" || d.ArtifactType == artifactType {
			out = append(out, d)
		}
	}
	return fn(out)
}

func (e *evidenceStore) Predecessors(ctx context.Context, node ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	var out []ocispec.Descriptor
	err := e.Referrers(ctx, node, "", func(r []ocispec.Descriptor) error { out = r; return nil })
	return out, err
}

func (e *evidenceStore) Tags(context.Context, string, func([]string) error) error {
	return fmt.Errorf("listing the tags of %s from the cache: %w", e.repo.Repo(), errdef.ErrUnsupported)
}

// validTag keeps a tag read from outside from naming a path elsewhere.
func validTag(tag string) bool {
	return len(tag) <= 128 && iox.CheckComponent(tag) == nil
}

// Recording wraps t, a target for repo, so that what a version's check reads through it (tags
// resolved, manifests and small blobs fetched, referrers listed) is kept as evidence for
// Evidence to answer from later. Zips are read through t itself, never through the recorder.
func (c *Cache) Recording(t oci.ReadOnly, repo oci.Ref) oci.ReadOnly {
	return &recorder{ReadOnly: t, c: c, repo: repo}
}

type recorder struct {
	oci.ReadOnly
	c    *Cache
	repo oci.Ref
	mu   sync.Mutex
	errs []error
}

// keep records what failed to be kept: the command goes on (the registry answered), and the
// next one that wants the evidence fetches it again.
func (r *recorder) keep(err error) {
	if err != nil {
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
	}
}

func (r *recorder) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := r.ReadOnly.Fetch(ctx, desc)
	if err != nil || desc.Size > maxEvidenceBlob || desc.MediaType == manifest.MediaTypeZip {
		return rc, err
	}
	defer rc.Close()
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, err
	}
	r.keep(r.c.putEvidence(desc.Digest, data))
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (r *recorder) Resolve(ctx context.Context, reference string) (ocispec.Descriptor, error) {
	desc, err := r.ReadOnly.Resolve(ctx, reference)
	if err == nil {
		r.recordTag(reference, desc)
	}
	return desc, err
}

func (r *recorder) recordTag(reference string, desc ocispec.Descriptor) {
	if _, err := digest.Parse(reference); err == nil || !validTag(reference) {
		return
	}
	r.keep(r.c.writeRecord(r.c.evidenceRefPath(r.repo, "tags", reference), ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}))
}

// FetchReference resolves and fetches in one request where the target can, keeping both.
func (r *recorder) FetchReference(ctx context.Context, reference string) (ocispec.Descriptor, io.ReadCloser, error) {
	rf, ok := r.ReadOnly.(registry.ReferenceFetcher)
	if !ok {
		desc, err := r.Resolve(ctx, reference)
		if err != nil {
			return desc, nil, err
		}
		rc, err := r.Fetch(ctx, desc)
		return desc, rc, err
	}
	desc, rc, err := rf.FetchReference(ctx, reference)
	if err != nil || desc.Size > maxEvidenceBlob {
		return desc, rc, err
	}
	defer rc.Close()
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return desc, nil, err
	}
	r.keep(r.c.putEvidence(desc.Digest, data))
	r.recordTag(reference, desc)
	return desc, io.NopCloser(bytes.NewReader(data)), nil
}

func (r *recorder) Referrers(ctx context.Context, desc ocispec.Descriptor, artifactType string, fn func([]ocispec.Descriptor) error) error {
	list, err := registry.Referrers(ctx, r.ReadOnly, desc, "")
	if err != nil {
		return err
	}
	r.keep(r.c.writeRecord(r.c.evidenceRefPath(r.repo, "referrers", desc.Digest.Encoded()), list))
	var out []ocispec.Descriptor
	for _, d := range list {
		if artifactType == "" || d.ArtifactType == artifactType {
			out = append(out, d)
		}
	}
	return fn(out)
}

// Problems is what could not be kept as evidence during this recorder's life.
func (r *recorder) Problems() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// VersionRefs lists the versions the cache holds records of, as repository:tag references, for
// judging their evidence again (cache verify). A record that does not parse is left out: Verify
// reports it.
func (c *Cache) VersionRefs() ([]oci.Ref, error) {
	inv, err := c.List()
	if err != nil {
		return nil, err
	}
	var out []oci.Ref
	for _, e := range inv.Entries {
		if e.Kind != kindVersion {
			continue
		}
		var m VersionMeta
		if !readRecord(e.Path, &m) {
			continue
		}
		ref, err := oci.ParseRef(m.Repository + ":" + m.Tag)
		if err != nil || c.metaPath(ref, m.Tag) != e.Path {
			continue // a record filed under another name than it claims
		}
		out = append(out, ref)
	}
	return out, nil
}
