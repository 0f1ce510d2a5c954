package sign

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/cosign/v2/pkg/providers"
	_ "github.com/sigstore/cosign/v2/pkg/providers/github" // GitHub Actions' token endpoint
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/oprov/oprov/pkg/oci"
)

// IDTokenEnv is where a keyless signer's OIDC token comes from without --identity-token, as for
// cosign (GitHub Actions and other CI systems set it, or a step exports it).
const IDTokenEnv = "SIGSTORE_ID_TOKEN"

// Keyless is how a keyless signature is made: an OIDC identity token, exchanged at Fulcio for a
// short-lived certificate, and the timestamp authorities (or a transparency log) that witness
// the signing time.
type Keyless struct {
	IDToken   string
	FulcioURL string
	TSAURLs   []string
	// RekorURL, when set, is a transparency log the signature is recorded in; RekorVersion is
	// its API's major version (1, or 2 for rekor-tiles).
	RekorURL     string
	RekorVersion uint32
	// TrustedRoot, when set, is checked against what was made before it is stored, so that a
	// misconfigured service is found at signing time rather than by every verifier.
	TrustedRoot *TrustedRoot
	Timeout     time.Duration
}

// The public-good Sigstore instance: keyless signing uses it when no Fulcio, timestamp
// authority, transparency log or signing configuration is named, as cosign does.
const (
	publicFulcioURL = "https://fulcio.sigstore.dev"
	publicRekorURL  = "https://rekor.sigstore.dev"
)

// idTokenAudience is the audience a CI's token is asked for: Fulcio's, as cosign asks.
const idTokenAudience = "sigstore"

// KeylessFrom completes keyless options from a signing configuration file as cosign v3 reads it
// (--signing-config: the Fulcio, timestamp authority and Rekor URLs valid now), URLs given
// explicitly winning, the public-good instance when neither names one; and the token, when none
// is given, from the CI's ambient identity as cosign finds it: SIGSTORE_ID_TOKEN (GitLab's
// id_tokens set it), else GitHub Actions' token endpoint (ACTIONS_ID_TOKEN_REQUEST_URL and
// ACTIONS_ID_TOKEN_REQUEST_TOKEN, audience sigstore).
func KeylessFrom(ctx context.Context, k Keyless, signingConfig string) (*Keyless, error) {
	if signingConfig != "" {
		sc, err := root.NewSigningConfigFromPath(signingConfig)
		if err != nil {
			return nil, fmt.Errorf("signing config %s: %w", signingConfig, err)
		}
		now := time.Now()
		if k.FulcioURL == "" {
			s, err := root.SelectService(sc.FulcioCertificateAuthorityURLs(), []uint32{1}, now)
			if err != nil {
				return nil, fmt.Errorf("signing config %s: no Fulcio valid now: %w", signingConfig, err)
			}
			k.FulcioURL = s.URL
		}
		if len(k.TSAURLs) == 0 {
			for _, s := range sc.TimestampAuthorityURLs() {
				if s.ValidAtTime(now) && s.MajorAPIVersion == 1 {
					k.TSAURLs = append(k.TSAURLs, s.URL)
				}
			}
		}
		if k.RekorURL == "" {
			if s, err := root.SelectService(sc.RekorLogURLs(), sgsign.RekorAPIVersions, now); err == nil {
				k.RekorURL, k.RekorVersion = s.URL, s.MajorAPIVersion
			}
		}
	} else if k.FulcioURL == "" && len(k.TSAURLs) == 0 && k.RekorURL == "" {
		k.FulcioURL, k.RekorURL, k.RekorVersion = publicFulcioURL, publicRekorURL, 1
	}
	if k.IDToken == "" {
		tok, err := ambientToken(ctx)
		if err != nil {
			return nil, err
		}
		k.IDToken = tok
	}
	switch {
	case k.FulcioURL == "":
		return nil, errors.New("keyless signing needs a Fulcio URL: --fulcio-url or --signing-config")
	case len(k.TSAURLs) == 0 && k.RekorURL == "":
		return nil, errors.New("keyless signing needs a timestamp authority or a transparency log, to prove the short-lived certificate was valid when it signed: --timestamp-server-url, --rekor-url or --signing-config")
	}
	return &k, nil
}

// ambientToken is the OIDC token of the CI job this runs in, found as cosign finds it:
// SIGSTORE_ID_TOKEN, else GitHub Actions' token endpoint (cosign's own provider for it).
func ambientToken(ctx context.Context) (string, error) {
	const none = "keyless signing needs an OIDC identity token: --identity-token or " + IDTokenEnv +
		" (GitLab CI: an id_tokens entry named " + IDTokenEnv + " with aud: sigstore), or a GitHub Actions job with 'permissions: id-token: write'"
	if tok := strings.TrimSpace(os.Getenv(IDTokenEnv)); tok != "" {
		return tok, nil
	}
	gh, err := providers.ProvideFrom(ctx, "github-actions")
	if err != nil || !gh.Enabled(ctx) {
		return "", errors.New(none)
	}
	tok, err := gh.Provide(ctx, idTokenAudience)
	if err != nil {
		return "", fmt.Errorf("keyless signing: GitHub Actions' token endpoint (ACTIONS_ID_TOKEN_REQUEST_URL) failed: %v", err)
	}
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", errors.New("keyless signing: GitHub Actions' token endpoint (ACTIONS_ID_TOKEN_REQUEST_URL) gave no token: give the job 'permissions: id-token: write'")
	}
	return tok, nil
}

// keylessBundle signs statement (an in-toto statement) as a DSSE envelope with a fresh key,
// whose certificate Fulcio issues for the token's identity, with the signature timestamped.
func (k *Keyless) bundle(ctx context.Context, st []byte) (*protobundle.Bundle, error) {
	timeout := k.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	kp, err := sgsign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, err
	}
	opts := sgsign.BundleOptions{
		Context:                    ctx,
		CertificateProvider:        sgsign.NewFulcio(&sgsign.FulcioOptions{BaseURL: k.FulcioURL, Timeout: timeout, Retries: 1}),
		CertificateProviderOptions: &sgsign.CertificateProviderOptions{IDToken: k.IDToken},
	}
	for _, u := range k.TSAURLs {
		opts.TimestampAuthorities = append(opts.TimestampAuthorities, sgsign.NewTimestampAuthority(&sgsign.TimestampAuthorityOptions{URL: u, Timeout: timeout, Retries: 1}))
	}
	if k.RekorURL != "" {
		opts.TransparencyLogs = append(opts.TransparencyLogs, sgsign.NewRekor(&sgsign.RekorOptions{BaseURL: k.RekorURL, Timeout: timeout, Retries: 1, Version: k.RekorVersion}))
	}
	if k.TrustedRoot != nil {
		opts.TrustedRoot = k.TrustedRoot.root
	}
	b, err := sgsign.Bundle(&sgsign.DSSEData{Data: st, PayloadType: inTotoPayloadType}, kp, opts)
	if err != nil {
		return nil, fmt.Errorf("keyless signing: %w", err)
	}
	return b, nil
}

// signKeyless stores a keyless bundle over subject as a referrer, the form cosign v3 writes.
func signKeyless(ctx context.Context, t oci.Target, subject ocispec.Descriptor, k *Keyless) (*SignResult, error) {
	st, err := subjectStatement(subject)
	if err != nil {
		return nil, err
	}
	b, err := k.bundle(ctx, st)
	if err != nil {
		return nil, err
	}
	data, err := protojson.Marshal(b)
	if err != nil {
		return nil, err
	}
	created, err := createdTime()
	if err != nil {
		return nil, err
	}
	art, err := bundleManifest(data, subject, created)
	if err != nil {
		return nil, err
	}
	kl, err := newKeylessBundle(b)
	if err != nil {
		return nil, err
	}
	who, err := signerOf(kl.leaf)
	if err != nil {
		return nil, err
	}
	if err := art.push(ctx, t); err != nil {
		return nil, err
	}
	return &SignResult{Form: formBundle, Subject: subject.Digest, Signature: art.manifest.desc.Digest, Signer: who}, nil
}
