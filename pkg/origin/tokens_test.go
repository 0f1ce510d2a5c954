package origin

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/tfcreds"
	"github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/tfcredstest"
)

// useCLIConfig points TF_CLI_CONFIG_FILE at a new file with this content.
func useCLIConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TF_CLI_CONFIG_FILE", p)
	return p
}

// checkAuthorization fails unless every request to the origin's host carried the token and no
// request to another host carried anything.
func checkAuthorization(t *testing.T, org *testorigin.Origin, token string) {
	t.Helper()
	others := 0
	for _, r := range org.Requests() {
		switch {
		case r.Host == org.Host && r.Authorization != "Bearer "+token:
			t.Errorf("%s%s came with Authorization %q", r.Host, r.Path, r.Authorization)
		case r.Host != org.Host:
			others++
			if r.Authorization != "" {
				t.Errorf("the token went to another host: %s%s came with Authorization %q", r.Host, r.Path, r.Authorization)
			}
		}
	}
	if others == 0 {
		t.Error("no request went to the other host: the test proves nothing")
	}
}

// TestTokenGoesToTheOriginOnly: a token from a credentials block reaches every request to the
// origin's host, and none to another host, whether the download answer names it or the origin
// redirects there.
func TestTokenGoesToTheOriginOnly(t *testing.T) {
	for _, f := range []testorigin.Faults{{FilesElsewhere: true}, {RedirectFiles: true}} {
		org, ca := testOrigin(t)
		useCLIConfig(t, `credentials "`+org.Host+`" { token = "s3cret" }`)
		f.Token = "s3cret"
		org.SetFaults(f)
		if err := readAll(org, ca); err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		checkAuthorization(t, org, "s3cret")
	}
}

// TestTokenFromEnvironment: TF_TOKEN_<host> is read, and wins over the CLI configuration.
func TestTokenFromEnvironment(t *testing.T) {
	org, ca := testOrigin(t)
	useCLIConfig(t, `credentials "`+org.Host+`" { token = "stale" }`)
	// A host with a port can only be named with the colon, as env(1) allows.
	t.Setenv("TF_TOKEN_"+org.Host, "from-env")
	org.SetFaults(testorigin.Faults{Token: "from-env"})
	o := newTestOrigin(t, org, ca)
	if _, err := o.Versions(context.Background(), "acme", "hello"); err != nil {
		t.Fatal(err)
	}
}

// TestAuthErrors: without a token the error names the host and how to give one; with a wrong
// one it names where the token came from; a refusal from another host says no token goes there.
func TestAuthErrors(t *testing.T) {
	org, ca := testOrigin(t)
	org.SetFaults(testorigin.Faults{Token: "s3cret"})
	err := readAll(org, ca)
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized: "+org.Host+" wants an API token: add credentials \""+org.Host+"\"") {
		t.Errorf("without a token: %v", err)
	}
	t.Logf("without a token: %v", err)

	rc := useCLIConfig(t, `credentials "`+org.Host+`" { token = "wrong" }`)
	err = readAll(org, ca)
	if err == nil || !strings.Contains(err.Error(), org.Host+" refused the API token from "+rc) {
		t.Errorf("with a wrong token: %v", err)
	}
	t.Logf("with a wrong token: %v", err)

	useCLIConfig(t, `credentials "`+org.Host+`" { token = "s3cret" }`)
	org.SetFaults(testorigin.Faults{Token: "s3cret", FilesElsewhere: true})
	o := newTestOrigin(t, org, ca)
	u, _ := zipOf(t, o, "1.0.0")
	org.SetFaults(testorigin.Faults{Token: "s3cret", FilesElsewhere: true, FailNext: 1, FailStatus: http.StatusForbidden})
	_, err = o.Fetch(context.Background(), u, &strings.Builder{}, 1<<20)
	if err == nil || !strings.Contains(err.Error(), org.FilesHost+" is not the origin registry "+org.Host+", so oprov sends it no token") {
		t.Errorf("a 403 from another host: %v", err)
	}
	t.Logf("a 403 from another host: %v", err)
}

// TestAuthErrorNamesTheVariable: for a host without a port, the error names its TF_TOKEN_
// variable (dashes doubled, dots as underscores) as well as the credentials block.
func TestAuthErrorNamesTheVariable(t *testing.T) {
	tfcredstest.Isolate(t, tfcreds.EnvPrefix)
	o := &Client{Host: "my-registry.example.com", authHost: "my-registry.example.com"}
	err := o.authError(errors.New("GET https://my-registry.example.com/v1/providers/a/b/versions: 401 Unauthorized"), "my-registry.example.com")
	if !strings.Contains(err.Error(), `my-registry.example.com wants an API token: set TF_TOKEN_my__registry_example_com, or add credentials "my-registry.example.com" { token = "..." }`) {
		t.Errorf("%v", err)
	}
}
