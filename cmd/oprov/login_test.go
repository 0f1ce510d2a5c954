package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// basicAuthRegistry answers the registry API's version check, and only for user "u" with
// password "p".
func basicAuthRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/" {
			http.NotFound(w, r)
			return
		}
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "p" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// storedAuths reads the hosts and "user:password" pairs of a docker config file.
func storedAuths(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Auths map[string]struct {
			Auth string `json:"auth"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for host, a := range cfg.Auths {
		b, _ := base64.StdEncoding.DecodeString(a.Auth)
		out[host] = string(b)
	}
	return out
}

func TestLoginStoresCheckedCredentials(t *testing.T) {
	ctx := context.Background()
	host := basicAuthRegistry(t)
	config := filepath.Join(t.TempDir(), "config.json")

	ios, out, _ := testIO()
	ios.In = strings.NewReader("wrong\n")
	o := &loginOptions{io: ios, Host: host, Username: "u", PasswordStdin: true}
	o.registry.RegistryConfig = config
	wantErrorContaining(t, runLogin(ctx, o), "the credentials were refused")
	if _, err := os.Stat(config); !os.IsNotExist(err) {
		t.Errorf("a refused login stored credentials: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("a refused login printed %q", out)
	}

	ios, out, _ = testIO()
	ios.In = strings.NewReader("p\n")
	o.io = ios
	if err := runLogin(ctx, o); err != nil {
		t.Fatal(err)
	}
	if want := "Logged in to " + host + " as u\n"; out.String() != want {
		t.Errorf("login output %q, want %q", out, want)
	}
	if got := storedAuths(t, config); got[host] != "u:p" {
		t.Errorf("stored credentials %v, want u:p for %s (the newline read from stdin is not part of the password)", got, host)
	}
}

func TestLoginUsageErrors(t *testing.T) {
	ctx := context.Background()
	ios, _, _ := testIO()
	wantUsageError(t, runLogin(ctx, &loginOptions{io: ios, Host: "example.com", Username: "u"}), "no terminal to prompt on: pass --password-stdin")
	ios.In = strings.NewReader("\n")
	wantUsageError(t, runLogin(ctx, &loginOptions{io: ios, Host: "example.com", Username: "u", PasswordStdin: true}), "a user name (-u) and a password are both needed")
	ios.In = strings.NewReader("secret")
	wantUsageError(t, runLogin(ctx, &loginOptions{io: ios, Host: "example.com", PasswordStdin: true}), "a user name (-u) and a password are both needed")
}

func TestLogout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	config := filepath.Join(dir, "config.json")
	auth := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cfg := `{"auths": {"example.com": {"auth": "` + auth("a:b") + `"}, "other.io": {"auth": "` + auth("c:d") + `"}}}`
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	ios, out, _ := testIO()
	if err := runLogout(ctx, &logoutOptions{io: ios, Host: "example.com"}); err != nil {
		t.Fatal(err)
	}
	if want := "Removed the credentials for example.com\n"; out.String() != want {
		t.Errorf("logout output %q, want %q", out, want)
	}
	got := storedAuths(t, config)
	if _, ok := got["example.com"]; ok || got["other.io"] != "c:d" {
		t.Errorf("after logout the config holds %v, want only other.io", got)
	}

	// Logging out of a registry with no stored credentials is not an error, and says so.
	for _, config := range []string{filepath.Join(t.TempDir(), "absent.json"), config} {
		ios, out, _ = testIO()
		o := &logoutOptions{io: ios, Host: "never.example"}
		o.registry.RegistryConfig = config
		if err := runLogout(ctx, o); err != nil {
			t.Fatal(err)
		}
		if want := "No credentials were stored for never.example: nothing to remove\n"; out.String() != want {
			t.Errorf("logout of a host without credentials said %q, want %q", out, want)
		}
	}
}

// TestLogoutJSONSaysWhatWasRemoved: -o json tells a script whether anything was removed.
func TestLogoutJSONSaysWhatWasRemoved(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"auths": {"example.com": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("a:b")) + `"}}}`
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, want := range []bool{true, false} {
		ios, out, _ := testIO()
		o := &logoutOptions{io: ios, Host: "example.com", output: jsonOut}
		o.registry.RegistryConfig = config
		if err := runLogout(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		var res struct{ Removed bool }
		decodeJSON(t, out, &res)
		if res.Removed != want {
			t.Errorf("logout -o json: removed %v, want %v (%s)", res.Removed, want, out)
		}
	}
}

func TestLoginLogoutArgsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"login"}, {"logout"}, {"logout", "a", "b"}} {
		_, stderr, code := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "wants one registry host") {
			t.Errorf("oprov %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
	}
}
