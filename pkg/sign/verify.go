package sign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
)

var errNotThisKey = errors.New("not signed by this key")

const noTrust = "no trusted keys or identities given (pass --key, --certificate-identity with --certificate-oidc-issuer, or --policy)"

// VerifyOptions says what to trust and what to check.
type VerifyOptions struct {
	// Limits bound what the registry may serve.
	Limits oci.Limits
	Keys   []PublicKey
	// Identities are the keyless signers trusted, checked against TrustedRoot, offline.
	Identities  []Identity
	TrustedRoot *TrustedRoot
	// Every platform's manifest is always fetched and checked. Zips is the platforms whose zips
	// are fetched and checked too (each must exist); AllZips fetches every platform's zip; HostZip
	// fetches this machine's platform's zip when the version has one.
	Zips    []manifest.Platform
	AllZips bool
	HostZip bool
	// NoZips fetches no zip: a module's one zip is fetched and checked unless it is set.
	NoZips bool
	// Kind, when set, refuses a reference that names another kind of subject (VerifyReference).
	Kind Kind
	// Progress hears about zip downloads.
	Progress oci.Progress
	// SignaturesOnly checks the signatures (and the version the index claims) and nothing
	// below the index: for callers that walk the digest chain themselves, once.
	SignaturesOnly bool
}

// Signature is a signature that checked out.
type Signature struct {
	Form     Form          `json:"form"`
	Manifest digest.Digest `json:"signature_manifest"`
	Key      string        `json:"key,omitempty"`
	KeyHint  string        `json:"key_hint,omitempty"` // base64 sha256 of the key, as sigstore bundles name keys
	// Signer is who signed keylessly, as the certificate says, and Time what proved when (a
	// timestamp authority's or a transparency log's time, inside the certificate's validity).
	Signer *CertSigner `json:"signer,omitempty"`
	Time   []string    `json:"time_proven_by,omitempty"`
}

// By names who made the signature: the key, or the certificate's identity.
func (s Signature) By() string {
	if s.Signer != nil {
		return s.Signer.String()
	}
	return s.Key
}

// Checked is a platform whose digest chain checked out.
type Checked struct {
	Platform string        `json:"platform"`
	Manifest digest.Digest `json:"manifest_digest"`
	Zip      digest.Digest `json:"zip_digest"`
	Fetched  bool          `json:"zip_fetched"`
}

// Result is a successful verification.
type Result struct {
	Reference  string      `json:"reference"`
	Version    string      `json:"version"`
	Digest     string      `json:"index_digest"`
	Signatures []Signature `json:"signatures"`
	Platforms  []Checked   `json:"platforms"`
}

// Error is a failed verification: it names the version, the digest, and what was wrong.
type Error struct {
	Ref    oci.Ref
	Digest digest.Digest
	Reason string
	// Unsigned is true when no signature at all was found.
	Unsigned bool
}

// Complete tells oci.Explain that the message already names the operation and reference.
func (e *Error) Complete() bool { return true }

func (e *Error) Error() string {
	if e.Digest == "" {
		return fmt.Sprintf("verify %s: %s", e.Ref, e.Reason)
	}
	return fmt.Sprintf("verify %s (%s): %s", e.Ref, e.Digest, e.Reason)
}

// Verify resolves ref once and verifies what it resolved to (verifyVersion).
func Verify(ctx context.Context, t oci.ReadOnly, ref oci.Ref, opts VerifyOptions) (*Result, error) {
	if len(opts.Keys) == 0 && len(opts.Identities) == 0 {
		return nil, &Error{Ref: ref, Reason: noTrust}
	}
	v, err := artifact.ResolveVersion(ctx, t, ref, opts.Limits)
	if err != nil {
		return nil, err
	}
	return verifyVersion(ctx, t, ref, v, opts)
}

// verifyVersion checks a version already resolved to its index digest: that one of opts.Keys
// signed exactly that digest, that the index is the version the tag claimed, and that the digest
// chain down to each platform manifest (and the selected zips) checks out. It never resolves a
// tag again, so a registry that answers two requests for the same tag differently cannot make it
// vouch for bytes it did not check. ref names the version in messages. Zips are fetched only once
// a good signature is found: an unsigned release costs a few small requests, not its size.
func verifyVersion(ctx context.Context, t oci.ReadOnly, ref oci.Ref, v *artifact.Version, opts VerifyOptions) (*Result, error) {
	fail := func(format string, args ...any) error {
		return &Error{Ref: ref, Digest: v.Index.Digest, Reason: fmt.Sprintf(format, args...)}
	}
	if len(opts.Keys) == 0 && len(opts.Identities) == 0 {
		return nil, fail(noTrust)
	}
	res := &Result{Reference: ref.String(), Version: v.Version, Digest: v.Index.Digest.String()}

	// Finding the signatures and fetching the platform manifests are independent and small: do
	// them at once, and judge the signatures first, so a signature problem is what gets reported.
	var (
		sigs              []Signature
		sigErr            error
		platforms         []*artifact.Platform
		chainErr          error
		wg                sync.WaitGroup
		skipPlatformCheck = opts.SignaturesOnly
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sigs, sigErr = checkSignatures(ctx, t, ref, v, opts)
	}()
	if !skipPlatformCheck {
		platforms, chainErr = fetchPlatforms(ctx, t, v)
	}
	wg.Wait()
	if sigErr != nil {
		return nil, sigErr
	}
	res.Signatures = sigs
	if skipPlatformCheck {
		return res, nil
	}
	if chainErr == nil {
		res.Platforms, chainErr = checkZips(ctx, t, v, platforms, opts)
	}
	if chainErr != nil {
		var ve *Error
		if errors.As(chainErr, &ve) {
			ve.Ref, ve.Digest = ref, v.Index.Digest
		}
		return nil, chainErr
	}
	return res, nil
}

// checkSignatures finds the signatures stored for v's index (I/O) and judges them (verifyEvidence).
func checkSignatures(ctx context.Context, t oci.ReadOnly, ref oci.Ref, v *artifact.Version, opts VerifyOptions) ([]Signature, error) {
	ev, err := findEvidence(ctx, t, v.Index)
	if err != nil {
		return nil, err
	}
	return verifyEvidence(ev, ref, v, opts)
}

// verifyEvidence is the verifier: it judges the signature evidence found for v's index against
// the trusted keys, identities and root in opts, and does no I/O, so the same evidence gives the
// same verdict whether it came from a registry, a bundle or the cache. It keeps the signatures a
// trusted signer made over exactly v's index digest; the index must also be the version the tag
// claimed, or a tag moved onto another validly signed version would pass. ref names the version
// in messages.
func verifyEvidence(ev *Evidence, ref oci.Ref, v *artifact.Version, opts VerifyOptions) ([]Signature, error) {
	fail := func(format string, args ...any) error {
		return &Error{Ref: ref, Digest: v.Index.Digest, Reason: fmt.Sprintf(format, args...)}
	}
	if len(opts.Keys) == 0 && len(opts.Identities) == 0 {
		return nil, fail(noTrust)
	}
	if ev == nil || ev.Subject.Digest != v.Index.Digest {
		return nil, fail("no signature evidence for this index was given")
	}
	cands := ev.candidates
	if len(cands) == 0 {
		named := ref.String()
		if v.Tag != "" {
			named = ref.Repo() + ":" + v.Tag
		}
		e := fail("not signed: no cosign signature referrer and no %s tag (its publisher signs it with 'oprov sign %s --key cosign.key')", manifest.CosignSignatureTag(v.Index.Digest), named)
		e.(*Error).Unsigned = true
		return nil, e
	}
	var good []Signature
	var problems []string
	for _, c := range cands {
		if c.problem != "" {
			problems = append(problems, c.problem)
			continue
		}
		sig, problem := checkCandidate(c, opts, v.Index.Digest)
		if sig != nil {
			good = append(good, *sig)
		} else if problem != "" {
			problems = append(problems, problem)
		}
	}
	if len(good) == 0 {
		if len(problems) == 0 {
			var names []string
			for _, k := range opts.Keys {
				names = append(names, k.Name)
			}
			for _, id := range opts.Identities {
				names = append(names, "identity "+id.String())
			}
			return nil, fail("%d signature(s) found, none by a trusted key (trusted: %s)", len(cands), strings.Join(names, ", "))
		}
		by := "a trusted key"
		if len(opts.Identities) > 0 {
			by = "a trusted key or identity"
			if len(opts.Keys) == 0 {
				by = "a trusted identity"
			}
		}
		return nil, fail("no valid signature by %s: %s", by, strings.Join(problems, "; "))
	}
	if want := v.Version; want != "" {
		if got := v.Parsed.Annotations[ocispec.AnnotationVersion]; got != "" && got != want {
			return nil, fail("the tag says version %s but the signed index is version %s (the tag was moved to another release)", want, got)
		}
	}
	return good, nil
}

// fetchPlatforms fetches every platform's manifest of v (digests checked), a few at a time, and
// checks that each is the version the tag names.
func fetchPlatforms(ctx context.Context, t oci.ReadOnly, v *artifact.Version) ([]*artifact.Platform, error) {
	out, err := artifact.FetchPlatforms(ctx, t, v)
	for _, p := range out {
		if err == nil {
			err = v.CheckPlatform(p)
		}
	}
	if err != nil {
		return nil, &Error{Reason: err.Error()}
	}
	return out, nil
}

// checkZips fetches the selected platforms' zips, checked against their digests.
func checkZips(ctx context.Context, t oci.ReadOnly, v *artifact.Version, platforms []*artifact.Platform, opts VerifyOptions) ([]Checked, error) {
	fetch := map[manifest.Platform]bool{}
	if !opts.AllZips && len(opts.Zips) > 0 {
		selected, err := v.Select(opts.Zips)
		if err != nil {
			return nil, err
		}
		for _, e := range selected {
			fetch[e.Platform] = true
		}
	}
	if opts.HostZip {
		fetch[manifest.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}] = true
	}
	out := make([]Checked, len(platforms))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(oci.DefaultConcurrency)
	for i, p := range platforms {
		out[i] = Checked{Platform: p.Platform.String(), Manifest: p.Manifest.Digest, Zip: p.Zip.Digest}
		if !opts.AllZips && !fetch[p.Platform] {
			continue
		}
		g.Go(func() error {
			if err := artifact.FetchZip(gctx, t, p, io.Discard, opts.Progress, opts.Limits); err != nil {
				return &Error{Reason: err.Error()}
			}
			out[i].Fetched = true
			return nil
		})
	}
	return out, g.Wait()
}

// checkCandidate checks one signature against the trusted keys. It returns the signature when it
// is good, or a problem when a trusted key made it but it does not fit.
func checkCandidate(c candidate, opts VerifyOptions, want digest.Digest) (*Signature, string) {
	if sig, problem := checkKeys(c, opts.Keys, want); sig != nil || problem != "" {
		return sig, problem
	}
	if k := c.keylessOf(); k != nil {
		// No trusted key made it (cosign can sign with a key and attach a certificate too).
		return checkKeyless(c, k, opts, want)
	}
	return nil, ""
}

// checkKeys checks one signature against the trusted keys.
func checkKeys(c candidate, keys []PublicKey, want digest.Digest) (*Signature, string) {
	for _, k := range keys {
		var names []digest.Digest
		var err error
		switch c.form {
		case formBundle:
			names, err = c.bundle.verify(k)
		case FormLegacy, formReferrer:
			var d digest.Digest
			d, err = c.legacy.verify(k)
			names = []digest.Digest{d}
		}
		if errors.Is(err, errNotThisKey) {
			continue
		}
		if err != nil {
			return nil, fmt.Sprintf("%s signature %s by %s: %v", c.form, short(c.manifest), k.Name, err)
		}
		for _, n := range names {
			if n == want {
				return &Signature{Form: c.form, Manifest: c.manifest, Key: k.Name, KeyHint: k.Hint}, ""
			}
		}
		return nil, fmt.Sprintf("%s signature %s by %s names %s, not %s: it was made for another artifact", c.form, short(c.manifest), k.Name, joinDigests(names), want)
	}
	return nil, ""
}

// keylessOf gives the certificate material of a keyless candidate, or nil for a key signature.
func (c candidate) keylessOf() *keyless {
	switch {
	case c.bundle != nil:
		return c.bundle.keyless
	case c.legacy != nil:
		return c.legacy.keyless
	}
	return nil
}

// checkKeyless checks a keyless signature against the trusted root and the trusted identities.
// Its problems are always reported: they name who signed, so that a refusal says which identity
// was found.
func checkKeyless(c candidate, k *keyless, opts VerifyOptions, want digest.Digest) (*Signature, string) {
	var names []digest.Digest
	var who *CertSigner
	var err error
	switch c.form {
	case formBundle:
		if who, err = k.check(opts.TrustedRoot, opts.Identities, want); err == nil {
			names, err = c.bundle.subjects()
		}
	default:
		if who, err = k.check(opts.TrustedRoot, opts.Identities, want); err == nil {
			var d digest.Digest
			d, err = c.legacy.subject()
			names = []digest.Digest{d}
		}
	}
	if err != nil {
		return nil, fmt.Sprintf("%s signature %s: %v", c.form, short(c.manifest), err)
	}
	for _, n := range names {
		if n == want {
			return &Signature{Form: c.form, Manifest: c.manifest, Signer: who, Time: k.times}, ""
		}
	}
	return nil, fmt.Sprintf("%s signature %s by %s names %s, not %s: it was made for another artifact", c.form, short(c.manifest), who, joinDigests(names), want)
}

func short(d digest.Digest) string {
	if len(d.Encoded()) > 12 {
		return d.Algorithm().String() + ":" + d.Encoded()[:12]
	}
	return d.String()
}

func joinDigests(ds []digest.Digest) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.String())
	}
	if len(s) == 0 {
		return "no digest"
	}
	return strings.Join(s, ", ")
}

func decodeJSON(data []byte, v any) error {
	return json.Unmarshal(data, v)
}
