package sign

import (
	"context"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
)

// A module package is one image manifest, not an index, but its signatures are stored and judged
// exactly as a provider index's: cosign-compatible, over the manifest's digest, and (when the tag
// is a version) only for the version the manifest's org.opencontainers.image.version names. So
// the module is checked as a version whose "index" is its manifest, signatures only; the zip
// below it is checked by its digest when it is fetched (modulepkg.Resolved.FetchZip). Any other
// manifest or index (a container image, such as oprov's own) is checked the same way
// (VerifySubject): what lies below it is checked by digest there.

// manifestVersion presents a manifest or index resolved from ref to desc as a version for the
// signature checks.
func manifestVersion(ref oci.Ref, desc ocispec.Descriptor, annotations map[string]string) *artifact.Version {
	v := &artifact.Version{Tag: ref.Reference, Index: desc, Parsed: &manifest.Index{Annotations: annotations}}
	if !ref.IsDigest() {
		if ver, err := manifest.TagToVersion(ref.Reference); err == nil {
			v.Version = ver
		}
	}
	return v
}

// DecideModule checks the signatures of a module package already resolved from ref (nothing is
// resolved by tag again): under the policy when there is one (the rule that covers ref's
// repository; modules have no provider address), else with opts.Keys and opts.Identities in
// enforce mode. The result's Digest is the manifest's; it lists no platforms.
func DecideModule(ctx context.Context, t oci.ReadOnly, ref oci.Ref, m *modulepkg.Resolved, p *Policy, opts VerifyOptions) (*Decision, error) {
	return decideManifest(ctx, t, ref, m.Manifest, m.Parsed.Annotations, p, opts)
}

// decideManifest checks the signatures over a manifest or index already resolved from ref to
// desc (nothing is resolved by tag again), as DecideModule does a module's: a trusted signer's
// signature over exactly desc's digest and, when ref's tag is a version, annotations (the
// manifest's) naming no other version. Nothing below desc is checked.
func decideManifest(ctx context.Context, t oci.ReadOnly, ref oci.Ref, desc ocispec.Descriptor, annotations map[string]string, p *Policy, opts VerifyOptions) (*Decision, error) {
	opts.SignaturesOnly = true
	return decide(ctx, t, ref, manifestVersion(ref, desc, annotations), p, "", opts)
}
