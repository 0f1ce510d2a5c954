package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitCodesSeparateRefusedFromCouldNotCheck: a script tells "refused" (not signed, signed by
// another key) from "could not check" (unreachable, 401) and from bad usage by the exit code alone,
// and verify -o json answers {"verified": false, ...} with the reason.
func TestExitCodesSeparateRefusedFromCouldNotCheck(t *testing.T) {
	repo, _ := pushedLayout(t)
	key, pub := keyPair(t, "good")
	_, otherPub := keyPair(t, "other")
	unsignedRepo, _ := pushedLayout(t)
	signLayout(t, repo, key, false)

	// A registry that wants credentials: 401 with a Basic challenge to every request.
	authSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer authSrv.Close()
	authHost := strings.TrimPrefix(authSrv.URL, "http://")
	creds := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, creds, `{"auths":{}}`)

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"not signed", []string{"verify", unsignedRepo + ":1.0.0", "--key", pub}, exitUnsigned, "not signed"},
		{"untrusted signer", []string{"verify", repo + ":1.0.0", "--key", otherPub}, exitRefused, "none by a trusted key"},
		{"registry unreachable", []string{"inspect", "127.0.0.1:1/acme/hello", "--registry-config", creds}, exitUnreachable, "connection refused"},
		{"401", []string{"inspect", authHost + "/acme/hello", "--registry-config", creds}, exitAuth, "401"},
		{"bad flag", []string{"verify", "--no-such-flag", repo + ":1.0.0"}, exitUsage, "unknown flag"},
		{"no such version", []string{"verify", repo + ":9.9.9", "--key", pub}, exitNotFound, "9.9.9 not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("oprov %s: exit %d, want %d; stderr %q (want %q)", strings.Join(tc.args, " "), code, tc.code, stderr, tc.stderr)
			}
		})
	}

	t.Run("verify -o json on refusal", func(t *testing.T) {
		stdout, _, code := runCLI(t, "verify", unsignedRepo+":1.0.0", "--key", pub, "-o", "json")
		var got map[string]any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%q", err, stdout)
		}
		if got["verified"] != false || !strings.Contains(got["reason"].(string), "not signed") || got["exit_code"] != float64(code) || code != exitUnsigned {
			t.Errorf("exit %d, answer %v", code, got)
		}
	})

	t.Run("-o json on any failure", func(t *testing.T) {
		stdout, _, code := runCLI(t, "inspect", "127.0.0.1:1/acme/hello", "--registry-config", creds, "-o", "json")
		var got struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || got.ExitCode != code || !strings.Contains(got.Error, "connection refused") {
			t.Errorf("exit %d, stdout %q (%v)", code, stdout, err)
		}
	})

	t.Run("help exit-codes", func(t *testing.T) {
		stdout, _, code := runCLI(t, "help", "exit-codes")
		for _, want := range []string{"10 ", "12 ", "cosign", "gh"} {
			if code != 0 || !strings.Contains(stdout, want) {
				t.Errorf("oprov help exit-codes: exit %d, no %q in\n%s", code, want, stdout)
			}
		}
	})
}
