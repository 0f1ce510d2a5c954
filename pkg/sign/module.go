package sign

import (
	"context"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
)

// A module package is one image manifest, not an index, but its signatures are stored and judged
// exactly as a provider index's: cosign-compatible, over the manifest's digest, and (when the tag
// is a version) only for the version the manifest's org.opencontainers.image.version names. So
// the module is checked as a version whose "index" is its manifest, signatures only; the zip
// below it is checked by its digest when it is fetched (modulepkg.Resolved.FetchZip).

// moduleVersion presents a resolved module package as a version for the signature checks.
func moduleVersion(ref oci.Ref, m *modulepkg.Resolved) *artifact.Version {
	v := &artifact.Version{Tag: ref.Reference, Index: m.Manifest, Parsed: &manifest.Index{Annotations: m.Parsed.Annotations}}
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
	opts.SignaturesOnly = true
	v := moduleVersion(ref, m)
	if p != nil {
		return p.Check(ctx, t, ref, v, "", opts)
	}
	res, err := VerifyVersion(ctx, t, ref, v, opts)
	if err != nil {
		return nil, err
	}
	return &Decision{Mode: ModeEnforce, Result: res}, nil
}
