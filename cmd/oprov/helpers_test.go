package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/oci"
)

// The run functions get their options as cobra would leave them: output formats are set here
// because the flag default ("text") is applied by cobra, not by the options struct.
var (
	textOut = outputFlag{Format: "text"}
	jsonOut = outputFlag{Format: "json"}
)

// testIO gives streams that are not terminals, with stdout and stderr captured.
func testIO() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errb}, &out, &errb
}

func decodeJSON(t *testing.T, b *bytes.Buffer, v any) {
	t.Helper()
	if err := json.Unmarshal(b.Bytes(), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, b)
	}
}

func wantUsageError(t *testing.T, err error, contains string) {
	t.Helper()
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Fatalf("want a usage error containing %q, got %v", contains, err)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Fatalf("usage error %q does not say %q", err, contains)
	}
}

func wantErrorContaining(t *testing.T, err error, contains string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got none", contains)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		t.Fatalf("want a plain failure (exit 1), got a usage error: %v", err)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Fatalf("error %q does not say %q", err, contains)
	}
}

// fakeBinaries lays out DIR/OS_ARCH/terraform-provider-hello for each platform: a shell script
// stands in for the provider, since packaging only needs a file named like one.
func fakeBinaries(t *testing.T, platforms ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bin")
	for _, p := range platforms {
		name := "terraform-provider-hello"
		if strings.HasPrefix(p, "windows_") {
			name += ".exe"
		}
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		script := "#!/bin/sh\necho " + p + "\n"
		if err := os.WriteFile(filepath.Join(dir, p, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// packageHello packages hello 1.0.0 for linux_amd64 and darwin_arm64 and returns the dist dir.
func packageHello(t *testing.T) string {
	t.Helper()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	dist := filepath.Join(t.TempDir(), "dist")
	ios, _, _ := testIO()
	o := &packageOptions{io: ios, BinDir: fakeBinaries(t, "linux_amd64", "darwin_arm64"), Version: "1.0.0", Name: "hello", OutDir: dist, output: textOut}
	if err := runPackage(context.Background(), o); err != nil {
		t.Fatalf("package: %v", err)
	}
	return dist
}

// pushedLayout pushes hello 1.0.0 into a new OCI layout and returns the layout's reference
// (oci-layout:DIR, no tag) and the index digest.
func pushedLayout(t *testing.T) (string, string) {
	t.Helper()
	dist := packageHello(t)
	repo := "oci-layout:" + filepath.Join(t.TempDir(), "hello")
	ios, out, _ := testIO()
	o := &pushOptions{io: ios, Sources: []string{dist}, Repo: repo, Concurrency: oci.DefaultConcurrency, output: jsonOut}
	if err := runPush(context.Background(), o); err != nil {
		t.Fatalf("push: %v", err)
	}
	var res struct {
		IndexDigest string `json:"index_digest"`
	}
	decodeJSON(t, out, &res)
	return repo, res.IndexDigest
}

// keyPair writes a cosign key pair (password "pw", also set as COSIGN_PASSWORD) and returns the
// paths of the private and public keys.
func keyPair(t *testing.T, name string) (string, string) {
	t.Helper()
	t.Setenv("COSIGN_PASSWORD", "pw")
	prefix := filepath.Join(t.TempDir(), name)
	ios, _, _ := testIO()
	if err := runKeygen(context.Background(), &keygenOptions{io: ios, Prefix: prefix}); err != nil {
		t.Fatalf("keygen: %v", err)
	}
	return prefix + ".key", prefix + ".pub"
}

// signLayout signs REPO:1.0.0 with key and returns the signature manifest's digest.
func signLayout(t *testing.T, repo, key string, legacy bool) string {
	t.Helper()
	ios, out, _ := testIO()
	o := &signOptions{io: ios, Ref: repo + ":1.0.0", Key: key, LegacyTag: legacy, output: jsonOut}
	if err := runSign(context.Background(), o); err != nil {
		t.Fatalf("sign: %v", err)
	}
	var res struct {
		Signature string `json:"signature_manifest"`
	}
	decodeJSON(t, out, &res)
	return res.Signature
}
