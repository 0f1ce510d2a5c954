// Package sigstack runs the Sigstore services a keyless signature needs on 127.0.0.1, for the
// end-to-end tests: an OIDC issuer of ours that mints GitHub Actions-shaped tokens, Fulcio with
// an ephemeral CA, and a timestamp authority; then it writes the trusted root (as cosign
// trusted-root create does) and a signing config (as cosign v3 reads).
package sigstack

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"
)

// Issuer is a minimal OIDC identity provider: a discovery document, its JWKS, and RS256 tokens
// signed by one key. Fulcio fetches the first two; tests mint tokens with Token.
type Issuer struct {
	URL string
	key *rsa.PrivateKey
	srv *http.Server

	mu       sync.Mutex
	requests int
}

const keyID = "sigstack-1"

// StartIssuer starts the issuer on a free port of 127.0.0.1.
func StartIssuer() (*Issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	is := &Issuer{URL: "http://" + ln.Addr().String(), key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		is.count()
		writeJSON(w, map[string]any{
			"issuer":                                is.URL,
			"jwks_uri":                              is.URL + "/jwks",
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"claims_supported":                      []string{"sub", "aud", "exp", "iat", "iss", "repository", "ref", "event_name", "job_workflow_ref"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.count()
		writeJSON(w, map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "use": "sig", "alg": "RS256", "kid": keyID,
			"n": b64(key.PublicKey.N.Bytes()), "e": b64(big.NewInt(int64(key.PublicKey.E)).Bytes()),
		}}})
	})
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go is.srv.Serve(ln)
	return is, nil
}

func (is *Issuer) count() {
	is.mu.Lock()
	is.requests++
	is.mu.Unlock()
}

// Requests is how many requests the issuer has answered (Fulcio's, at signing time).
func (is *Issuer) Requests() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.requests
}

// Close stops the issuer.
func (is *Issuer) Close() { is.srv.Close() }

// Workflow is what a GitHub Actions run puts in its OIDC token.
type Workflow struct {
	Repository string // owner/name
	Workflow   string // the workflow file, as .github/workflows/release.yml
	Ref        string // refs/tags/v1.0.0
	Event      string // push
}

// Subject is the certificate identity Fulcio derives from a workflow token: the job workflow's
// URL at its ref.
func (w Workflow) Subject() string {
	return "https://github.com/" + w.Repository + "/" + w.Workflow + "@" + w.Ref
}

// Token mints an identity token for a workflow run, with the claims GitHub Actions sets and
// Fulcio's github-workflow issuer type requires, valid for ten minutes.
func (is *Issuer) Token(w Workflow) (string, error) {
	now := time.Now()
	owner := w.Repository
	for i := range owner {
		if owner[i] == '/' {
			owner = owner[:i]
			break
		}
	}
	sha := "0123456789abcdef0123456789abcdef01234567"
	claims := map[string]any{
		"iss": is.URL, "aud": "sigstore", "sub": "repo:" + w.Repository + ":ref:" + w.Ref,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(), "jti": b64(randBytes(8)),
		"repository": w.Repository, "repository_owner": owner, "repository_id": "1001", "repository_owner_id": "2002",
		"repository_visibility": "public", "ref": w.Ref, "ref_type": "tag", "sha": sha,
		"workflow":           w.Workflow,
		"workflow_ref":       w.Repository + "/" + w.Workflow + "@" + w.Ref,
		"workflow_sha":       sha,
		"job_workflow_ref":   w.Repository + "/" + w.Workflow + "@" + w.Ref,
		"job_workflow_sha":   sha,
		"event_name":         w.Event,
		"run_id":             "42",
		"run_attempt":        "1",
		"runner_environment": "github-hosted",
		"actor":              "release-bot",
	}
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": keyID})
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := b64(header) + "." + b64(body)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, is.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + b64(sig), nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
