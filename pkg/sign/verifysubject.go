package sign

import (
	"context"
	"fmt"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/pkg/oci"
)

// Verification is what verifying a reference found, a provider's, a module's and an image's
// alike: what the reference named (its kind, and the digest it resolved to, over which the
// signatures are), the decision (the trust rule and mode that applied; the signatures that
// passed, each with the key or identity that made it; in warn mode, the failure), and what was
// checked below the signed digest, by digest: a provider's platforms (in the decision's Result),
// a module's zip, an image index's manifests.
type Verification struct {
	Reference   string            // as given
	Kind        Kind              // what it names
	Digest      digest.Digest     // the manifest or index it resolved to
	MediaType   string            // that manifest's or index's
	Tag         string            // the reference's tag ("" when it named a digest)
	Annotations map[string]string // a module's or an image's manifest's (none for a provider)
	Decision
	Zip       *ModuleZip      // a module's
	Manifests []ImageManifest // an image index's
}

// ModuleZip is a module package's zip: Fetched when it was fetched and checked against its
// digest, with its hashes (h1: and zh:, as OpenTofu pins them).
type ModuleZip struct {
	Desc    ocispec.Descriptor
	Fetched bool
	H1, ZH  string
}

// ImageManifest is an entry of an image index that was fetched and checked against its digest.
type ImageManifest struct {
	Platform string `json:"platform,omitempty"`
	Digest   string `json:"digest"`
}

// OptionsError is options that do not fit what the reference names (a provider's platforms or
// address for a module or an image): the request is wrong, not the artifact. Nothing was checked.
type OptionsError struct{ msg string }

func (e *OptionsError) Error() string { return e.msg }

// KindError is a reference that names another kind of subject than the caller asked for: a
// refusal, made before any signature was checked.
type KindError struct {
	Ref  oci.Ref
	Kind Kind // what it names
	Want Kind // what was asked for
}

// Complete tells oci.Explain that the message already names the operation and reference.
func (e *KindError) Complete() bool { return true }

func (e *KindError) Error() string {
	return fmt.Sprintf("verify %s: this is %s %s, not %s %s (--kind %s): nothing was verified", e.Ref, article(e.Kind), e.Kind, article(e.Want), e.Want, e.Want)
}

// VerifyReference resolves ref once (its tag is asked for one time, and everything below is read
// by the digest it gave) and verifies what it names: a trusted signer's signature over exactly
// that digest, under the policy when there is one (the rule for the repository, or for provider
// when it names a provider's address), else opts.Keys and opts.Identities in enforce mode. Then
// what lies below that digest is checked by digest: a provider's platform manifests and the zips
// opts selects, a module's zip (unless opts.NoZips), an image index's manifests (an image's
// layers are not oprov's to check). In warn mode a failed signature check is the Verification's
// Warning; a provider's platforms are then not checked, a module's zip and an image's manifests
// still are.
//
// A subject of another kind than opts.Kind (when set) is refused before any signature is checked:
// a *KindError, and provider options for a module or an image are an *OptionsError.
func VerifyReference(ctx context.Context, t oci.ReadOnly, ref oci.Ref, p *Policy, provider string, opts VerifyOptions) (*Verification, error) {
	s, err := Resolve(ctx, t, ref, opts.Limits)
	if err != nil {
		return nil, err
	}
	if err := s.fits(provider, opts); err != nil {
		return nil, err
	}
	v := &Verification{Reference: ref.String(), Kind: s.Kind, Digest: s.Desc.Digest, MediaType: s.Desc.MediaType}
	if !ref.IsDigest() {
		v.Tag = ref.Reference
	}
	var d *Decision
	if s.Kind == KindProvider {
		d, err = decide(ctx, t, ref, s.Version, p, provider, opts)
	} else {
		// A module package or an image: one manifest or index, its signatures judged as a
		// version's index's are, then what it lists below it, by digest.
		v.Annotations = s.annotations()
		if d, err = decideManifest(ctx, t, ref, s.Desc, v.Annotations, p, opts); err == nil {
			v.Zip, v.Manifests, err = checkListed(ctx, t, s, opts)
		}
	}
	if err != nil {
		return nil, err
	}
	v.Decision = *d
	return v, nil
}

// fits refuses a subject of another kind than opts.Kind asks for (a tag moved onto something
// else its signer also signed is not what the caller asked for), and provider options for what
// is not a provider.
func (s *Subject) fits(provider string, opts VerifyOptions) error {
	if opts.Kind != "" && opts.Kind != s.Kind {
		return &KindError{Ref: s.Ref, Kind: s.Kind, Want: opts.Kind}
	}
	if len(opts.Zips) == 0 && !opts.AllZips && provider == "" {
		return nil
	}
	switch s.Kind {
	case KindModule:
		return &OptionsError{fmt.Sprintf("verify %s: this is a module package, which has no platforms and no provider address: drop --platform, --all-platforms and --address", s.Ref)}
	case KindImage:
		return &OptionsError{fmt.Sprintf("verify %s: this is not an OpenTofu provider or module (media type %q): it has no zips and no provider address: drop --platform, --all-platforms and --address", s.Ref, s.Desc.MediaType)}
	}
	return nil
}

// article is "an" before image, else "a".
func article(k Kind) string {
	if k == KindImage {
		return "an"
	}
	return "a"
}

// checkListed checks what a module's or an image's signed manifest lists below it, by digest: a
// module's zip (fetched within the package size limit, unless opts.NoZips, and hashed), an image
// index's manifests.
func checkListed(ctx context.Context, t oci.ReadOnly, s *Subject, opts VerifyOptions) (*ModuleZip, []ImageManifest, error) {
	if s.Kind == KindModule {
		zip := &ModuleZip{Desc: s.Module.Layer(), Fetched: !opts.NoZips}
		if !zip.Fetched {
			return zip, nil, nil
		}
		l := opts.Limits.WithDefaults()
		if err := l.CheckBlobSize("the module zip", zip.Desc.Size); err != nil {
			return nil, nil, err
		}
		var err error
		if zip.H1, zip.ZH, err = s.Module.ZipHashes(ctx, t, l.MaxPackageSize); err != nil {
			return nil, nil, err
		}
		return zip, nil, nil
	}
	if err := oci.FetchIndexManifests(ctx, t, "verify", s.Ref, s.Desc, s.Image.Manifests); err != nil {
		return nil, nil, err
	}
	var checked []ImageManifest
	for _, m := range s.Image.Manifests {
		im := ImageManifest{Digest: m.Digest.String()}
		if p := m.Platform; p != nil {
			im.Platform = p.OS + "/" + p.Architecture
			if p.Variant != "" {
				im.Platform += "/" + p.Variant
			}
		}
		checked = append(checked, im)
	}
	return nil, checked, nil
}
