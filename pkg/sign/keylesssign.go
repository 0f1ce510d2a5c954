package sign

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
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
// SIGSTORE_ID_TOKEN, else GitHub Actions' token endpoint.
func ambientToken(ctx context.Context) (string, error) {
	const none = "keyless signing needs an OIDC identity token: --identity-token or " + IDTokenEnv +
		" (GitLab CI: an id_tokens entry named " + IDTokenEnv + " with aud: sigstore), or a GitHub Actions job with 'permissions: id-token: write'"
	if tok := strings.TrimSpace(os.Getenv(IDTokenEnv)); tok != "" {
		return tok, nil
	}
	endpoint, bearer := os.Getenv(githubTokenURLEnv), os.Getenv(githubTokenBearerEnv)
	if endpoint == "" || bearer == "" {
		return "", errors.New(none)
	}
	tok, err := githubToken(ctx, endpoint, bearer)
	if err != nil {
		return "", fmt.Errorf("keyless signing: GitHub Actions' token endpoint (%s): %v", githubTokenURLEnv, err)
	}
	return tok, nil
}

// GitHub Actions' token endpoint, as a job with 'permissions: id-token: write' sees it: its URL,
// and the request token that is its bearer credential.
const (
	githubTokenURLEnv    = "ACTIONS_ID_TOKEN_REQUEST_URL"
	githubTokenBearerEnv = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
)

// Bounds on GitHub's token endpoint: its answer is a JSON object holding one JWT of a few
// kilobytes, given within a second or two.
const maxIDTokenAnswer = 64 << 10

var idTokenTimeout = 30 * time.Second

// githubToken asks GitHub Actions' token endpoint for a token for Fulcio's audience, as cosign
// does, but bounded: in time (idTokenTimeout) and bytes (maxIDTokenAnswer), no redirect (the
// request token is a credential, for this URL alone), only a 200 answer, and a JWT for the
// sigstore audience, so that a token meant for another service is never sent to Fulcio. Its
// errors never hold the request token nor what the endpoint sent.
func githubToken(ctx context.Context, endpoint, bearer string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", errors.New("the URL is not an http(s) URL")
	}
	// Appended, as GitHub's own toolkit does: the URL's query is GitHub's, and stays as written.
	aud := "audience=" + url.QueryEscape(idTokenAudience)
	if u.RawQuery == "" {
		u.RawQuery = aud
	} else {
		u.RawQuery += "&" + aud
	}
	ctx, cancel := context.WithTimeout(ctx, idTokenTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", errors.New("the URL is not an http(s) URL")
	}
	req.Header.Set("Authorization", "bearer "+bearer)
	req.Header.Set("Accept", "application/json")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("no answer within %s (the time allowed)", idTokenTimeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("%s: %v", u.Host, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return "", fmt.Errorf("answered with a redirect (%s), which is not followed: the request token is for this URL alone", resp.Status)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("answered %s: give the job 'permissions: id-token: write'", printable(resp.Status))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIDTokenAnswer+1))
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("no whole answer within %s (the time allowed)", idTokenTimeout)
		}
		return "", fmt.Errorf("reading the answer: %v", err)
	}
	if len(body) > maxIDTokenAnswer {
		return "", fmt.Errorf("the answer is over %d bytes, larger than any token", maxIDTokenAnswer)
	}
	var answer struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return "", errors.New("the answer is not JSON with a token in \"value\"")
	}
	tok := strings.TrimSpace(answer.Value)
	if tok == "" {
		return "", errors.New("gave no token: give the job 'permissions: id-token: write'")
	}
	if err := checkAudience(tok, idTokenAudience); err != nil {
		return "", err
	}
	return tok, nil
}

// checkAudience reads, without checking its signature (Fulcio does), the audience a JWT is for,
// and refuses it unless it includes aud.
func checkAudience(tok, aud string) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("the token is not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return errors.New("the token is not a JWT: its claims are not base64url")
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return errors.New("the token is not a JWT: its claims are not JSON")
	}
	var auds []string
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		auds = []string{one}
	} else if json.Unmarshal(claims.Aud, &auds) != nil {
		return errors.New("the token names no audience")
	}
	for _, a := range auds {
		if a == aud {
			return nil
		}
	}
	return fmt.Errorf("the token is for another audience (%s), not %q: it is not sent to Fulcio", printable(strings.Join(auds, ", ")), aud)
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
