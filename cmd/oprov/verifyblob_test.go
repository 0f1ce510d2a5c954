package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/sign"
)

// blobBundle signs data with the cosign key file key as cosign sign-blob --new-bundle-format
// does, and writes the bundle to path.
func blobBundle(t *testing.T, key string, data []byte, path string) {
	t.Helper()
	s, err := sign.LoadSigner(key, sign.EnvPassword(nil))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.SignMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	writeFile(t, path, fmt.Sprintf(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":%q}},"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":%q},"signature":%q}}`,
		s.Public.Hint, base64.StdEncoding.EncodeToString(sum[:]), base64.StdEncoding.EncodeToString(sig)))
}

// TestVerifyBlobExitCodes: verify-blob accepts a file its bundle signs (exit 0, text and JSON);
// refuses another key, a changed file and another kind of bundle with 10 and a bundle with no
// signature with 12, answering {"verified": false, ...} with -o json; a missing file or flag is
// usage (2), and so is a directory given as a file.
func TestVerifyBlobExitCodes(t *testing.T) {
	dir := t.TempDir()
	key, pub := keyPair(t, "good")
	_, otherPub := keyPair(t, "other")
	data := []byte("0123abcd  oprov_1.0.0_linux_amd64.tar.gz\n")
	file := filepath.Join(dir, "SHA256SUMS")
	writeFile(t, file, string(data))
	bundle := filepath.Join(dir, "SHA256SUMS.bundle")
	blobBundle(t, key, data, bundle)
	changed := filepath.Join(dir, "changed")
	writeFile(t, changed, string(data)+"evil\n")
	unsigned := filepath.Join(dir, "unsigned.bundle")
	writeFile(t, unsigned, `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}}}`)
	big := filepath.Join(dir, "big.bundle")
	writeFile(t, big, "")
	if err := os.Truncate(big, 8<<20); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old.bundle")
	writeFile(t, old, `{"base64Signature":"MEUCIQ=="}`)

	stdout, stderr, code := runCLI(t, "verify-blob", file, "--bundle", bundle, "--key", otherPub, "--key", pub)
	if code != 0 || !strings.Contains(stdout, "Verified "+file+" (sha256:") || !strings.Contains(stdout, "signed by "+pub) {
		t.Errorf("exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, _, code = runCLI(t, "verify-blob", file, "--bundle", bundle, "--key", pub, "-o", "json")
	var ok struct {
		Verified bool   `json:"verified"`
		File     string `json:"file"`
		Digest   string `json:"digest"`
		Key      string `json:"key"`
	}
	sum := sha256.Sum256(data)
	if err := json.Unmarshal([]byte(stdout), &ok); err != nil || code != 0 || !ok.Verified || ok.Key != pub || ok.Digest != fmt.Sprintf("sha256:%x", sum) || ok.File != file {
		t.Errorf("-o json: exit %d, %v\n%s", code, err, stdout)
	}

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"another key", []string{file, "--bundle", bundle, "--key", otherPub}, exitRefused, "not by a trusted key"},
		{"a changed file", []string{changed, "--bundle", bundle, "--key", pub}, exitRefused, "the file was changed"},
		{"an old-format bundle", []string{file, "--bundle", old, "--key", pub}, exitRefused, "sign again with --new-bundle-format"},
		{"no signature", []string{file, "--bundle", unsigned, "--key", pub}, exitUnsigned, "not signed"},
		{"no such file", []string{filepath.Join(dir, "nope"), "--bundle", bundle, "--key", pub}, exitUsage, "no such file " + filepath.Join(dir, "nope")},
		{"no such file, an unsigned bundle", []string{filepath.Join(dir, "nope"), "--bundle", unsigned, "--key", pub}, exitUsage, "no such file " + filepath.Join(dir, "nope")},
		{"no such bundle", []string{file, "--bundle", filepath.Join(dir, "nope.bundle"), "--key", pub}, exitUsage, "no such file " + filepath.Join(dir, "nope.bundle")},
		{"no such key", []string{file, "--bundle", bundle, "--key", filepath.Join(dir, "nope.pub")}, exitUsage, "no such file"},
		{"no --bundle", []string{file, "--key", pub}, exitUsage, "give --bundle"},
		{"no key", []string{file, "--bundle", bundle}, exitUsage, "give --key PUB"},
		{"identity without a root", []string{file, "--bundle", bundle, "--certificate-identity", "x", "--certificate-oidc-issuer", "https://i"}, exitUsage, "--trusted-root"},
		{"a directory", []string{dir, "--bundle", bundle, "--key", pub}, exitUsage, dir + " is a directory, not a file"},
		{"a directory as bundle", []string{file, "--bundle", dir, "--key", pub}, exitUsage, "bundle " + dir + " is a directory, not a file"},
		{"a bundle too large", []string{file, "--bundle", big, "--key", pub}, exitRefused, "bundle " + big + " is over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, append([]string{"verify-blob"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d; stderr %q (want %q)", code, tc.code, stderr, tc.stderr)
			}
		})
	}

	t.Run("-o json on refusal", func(t *testing.T) {
		for _, tc := range []struct {
			bundle, file string
			code         int
		}{{bundle, changed, exitRefused}, {unsigned, file, exitUnsigned}} {
			stdout, _, code := runCLI(t, "verify-blob", tc.file, "--bundle", tc.bundle, "--key", pub, "-o", "json")
			var got map[string]any
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%q", err, stdout)
			}
			if code != tc.code || got["verified"] != false || got["exit_code"] != float64(code) || got["file"] != tc.file || got["reason"] == "" {
				t.Errorf("exit %d, answer %v", code, got)
			}
		}
	})
}
