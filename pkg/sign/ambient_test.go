package sign

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// githubTokenEndpoint plays GitHub Actions' ACTIONS_ID_TOKEN_REQUEST_URL: it hands token out
// for the request token bearer and the sigstore audience only.
func githubTokenEndpoint(t *testing.T, bearer, token string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "bearer "+bearer || r.URL.Query().Get("audience") != "sigstore" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"message": "Unable to get ACTIONS_ID_TOKEN_REQUEST_URL env variable"})
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"value": token})
	}))
	t.Cleanup(srv.Close)
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", srv.URL+"/token?api-version=2.0")
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", bearer)
}

// TestKeylessFindsTheCIsIdentity: with no token given, keyless signing takes SIGSTORE_ID_TOKEN,
// else asks GitHub Actions' token endpoint for one (audience sigstore), and uses the public-good
// instance when no service is named; a refusing endpoint or no CI at all is a clear error.
func TestKeylessFindsTheCIsIdentity(t *testing.T) {
	ctx := context.Background()
	t.Setenv(IDTokenEnv, "")
	githubTokenEndpoint(t, "request-token", "github-oidc-token")
	k, err := KeylessFrom(ctx, Keyless{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if k.IDToken != "github-oidc-token" || k.FulcioURL != publicFulcioURL || k.RekorURL != publicRekorURL {
		t.Errorf("from GitHub Actions: %+v", k)
	}

	t.Setenv(IDTokenEnv, "gitlab-oidc-token") // GitLab's id_tokens: SIGSTORE_ID_TOKEN wins
	if k, err = KeylessFrom(ctx, Keyless{FulcioURL: "https://fulcio.example", TSAURLs: []string{"https://tsa.example"}}, ""); err != nil || k.IDToken != "gitlab-oidc-token" || k.RekorURL != "" {
		t.Errorf("from SIGSTORE_ID_TOKEN with a private instance: %+v, %v", k, err)
	}

	t.Setenv(IDTokenEnv, "")
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "wrong")
	if _, err = KeylessFrom(ctx, Keyless{}, ""); err == nil || !strings.Contains(err.Error(), "id-token: write") {
		t.Errorf("a refusing token endpoint: %v", err)
	}
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "")
	if _, err = KeylessFrom(ctx, Keyless{}, ""); err == nil || !strings.Contains(err.Error(), "--identity-token or SIGSTORE_ID_TOKEN") {
		t.Errorf("no CI identity: %v", err)
	}
}
