package sign

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
	ghToken := testJWT(t, map[string]any{"aud": "sigstore", "sub": "repo:acme/x"})
	githubTokenEndpoint(t, "request-token", ghToken)
	k, err := KeylessFrom(ctx, Keyless{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if k.IDToken != ghToken || k.FulcioURL != publicFulcioURL || k.RekorURL != publicRekorURL {
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

// testJWT is an unsigned JWT whose claims are claims: what the token endpoint hands out, read
// by oprov only for its audience (Fulcio checks the signature).
func testJWT(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc(b) + ".c2ln"
}

// TestAmbientTokenEndpointHostile: a hostile or broken GitHub Actions token endpoint is refused
// with a clear error, bounded in bytes and time, and the request token goes to the endpoint
// alone: an endless answer, an error status, a redirect to another host, a page that is not
// JSON, a token for another audience, and an endpoint that never answers.
func TestAmbientTokenEndpointHostile(t *testing.T) {
	const bearer = "request-token-secret"
	good := testJWT(t, map[string]any{"aud": "sigstore", "sub": "repo:acme/x"})
	leaked := make(chan string, 16)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			leaked <- a
		}
		json.NewEncoder(w).Encode(map[string]string{"value": good})
	}))
	t.Cleanup(other.Close)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"endless answer", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"value":"`)
			chunk := strings.Repeat("A", 1<<20)
			for i := 0; i < 64; i++ {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			io.WriteString(w, `"}`)
		}, "bytes"},
		{"error status", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]string{"value": good})
		}, "500"},
		{"redirect to another host", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/token", http.StatusFound)
		}, "redirect"},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "<html>sign in</html>")
		}, "JSON"},
		{"another audience", func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(map[string]string{"value": testJWT(t, map[string]any{"aud": []string{"https://vault.example"}})})
		}, "audience"},
		{"not a JWT", func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(map[string]string{"value": "\x1b[2Jnot-a-token"})
		}, "not a JWT"},
		{"never answers", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-stop:
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		}, "time"},
	}
	defer func(d time.Duration) { idTokenTimeout = d }(idTokenTimeout)
	idTokenTimeout = time.Second
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			t.Cleanup(srv.Close)
			t.Setenv(IDTokenEnv, "")
			t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", srv.URL+"/token?api-version=2.0")
			t.Setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", bearer)
			type answer struct {
				k   *Keyless
				err error
			}
			done := make(chan answer, 1)
			go func() {
				k, err := KeylessFrom(context.Background(), Keyless{}, "")
				done <- answer{k, err}
			}()
			var a answer
			select {
			case a = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("no answer from KeylessFrom after 20s: the token endpoint's time is not bounded")
			}
			if a.err == nil {
				t.Fatalf("accepted a token of %d bytes", len(a.k.IDToken))
			}
			if !strings.Contains(a.err.Error(), c.want) || !strings.Contains(a.err.Error(), "ACTIONS_ID_TOKEN_REQUEST_URL") {
				t.Errorf("error %q: want it to name %q and the endpoint", a.err, c.want)
			}
			if strings.Contains(a.err.Error(), bearer) || strings.ContainsRune(a.err.Error(), 0x1b) {
				t.Errorf("the error shows the request token or a control character: %q", a.err)
			}
		})
	}
	select {
	case a := <-leaked:
		t.Errorf("the request token reached another host: %q", a)
	default:
	}
}
