package tests

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/sigstack"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// TestKeylessAmbientGitHubIdentity: in a GitHub Actions job (a token endpoint on 127.0.0.1 plays
// ACTIONS_ID_TOKEN_REQUEST_URL, handing out the tests' OIDC issuer's token for the release
// workflow), 'oprov push --sign' with no other signing flag signs keylessly against the tests'
// Fulcio (named once by OPROV_SIGNING_CONFIG, as a private instance would be), and 'oprov verify
// --certificate-identity' accepts the signature; another identity is refused.
func TestKeylessAmbientGitHubIdentity(t *testing.T) {
	st := sigstack.Start(t)
	reg := testreg.Start(t, testreg.Options{})
	const bearer = "actions-request-token"
	asked := 0
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		if r.Header.Get("Authorization") != "bearer "+bearer || r.URL.Query().Get("audience") != "sigstore" {
			http.Error(w, `{"message":"bad request token or audience"}`, http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"value": st.Token(t, releaseWorkflow)})
	}))
	defer endpoint.Close()
	env := []string{"SIGSTORE_ID_TOKEN=", "ACTIONS_ID_TOKEN_REQUEST_URL=" + endpoint.URL + "/?api-version=2.0",
		"ACTIONS_ID_TOKEN_REQUEST_TOKEN=" + bearer, "OPROV_SIGNING_CONFIG=" + st.SigningConfig}
	R := reg.Host + "/providers/acme/hello"
	ca := []string{"--ca-file", reg.CAFile}

	out := pushJSON(t, env, append([]string{helloRelease(t), R, "--sign", "--address", "example.com/acme/hello"}, ca...)...)
	if asked != 1 {
		t.Errorf("the token endpoint was asked %d times, want once", asked)
	}
	r := mustOprov(t, nil, append(append([]string{"verify", R + ":1.0.0"}, keylessFlags(st, releaseWorkflow)...), ca...)...)
	if !strings.Contains(r.Stdout, "keyless") || !strings.Contains(r.Stdout, releaseWorkflow.Subject()) {
		t.Errorf("verify of push --sign's signature (index %s):\n%s", out.IndexDigest, r.Stdout)
	}
	// Control: the same signature under another identity is refused, so the acceptance means something.
	r = oprov(t, nil, append(append([]string{"verify", R + ":1.0.0"}, keylessFlags(st, nightlyWorkflow)...), ca...)...)
	if r.Code == 0 || !strings.Contains(r.Stderr, releaseWorkflow.Subject()) {
		t.Errorf("verify under another identity: exit %d\n%s", r.Code, r.Stderr)
	}
}
