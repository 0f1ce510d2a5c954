package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errb}, args)
	return out.String(), errb.String(), code
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"push"},
		{"push", "dist"},
		{"push", "--no-such-flag", "a", "b"},
		{"pull", "a/b"},
		{"package", "--version", "1.0.0"},
		{"package", "--go", "x", "--bin", "y", "--version", "1.0.0"},
		{"inspect", "a/b", "-o", "yaml"},
		{"push", "dist", "nohost"},
		{"login", "example.com"},
		{"package", "--go", ".", "--version", "1.0.0", "--platform", "linux"},
		{"keygen", "extra"},
		{"sign", "oci-layout:x:1.0.0"},
		{"verify", "oci-layout:x:1.0.0"},
		{"copy", "oci-layout:x", "oci-layout:y"},
		{"save", "oci-layout:x"},
		{"load", "x.tar"},
		{"attach", "oci-layout:x:1.0.0", "sbom.json"},
		{"discover", "oci-layout:x"},
		{"mirror", "hashicorp/random"},
		{"inspect", "a/b", "c/d"},
		// A key file that does not exist is a bad argument (as verify-blob says it).
		{"verify", "--key", "no-such.pub", "127.0.0.1:1/acme/hello:1.0.0"},
		{"verify", "--policy", "no-such-policy.hcl", "127.0.0.1:1/acme/hello:1.0.0"},
	} {
		_, stderr, code := runCLI(t, args...)
		if code != exitUsage {
			t.Errorf("oprov %s: exit %d, want 2 (stderr %q)", strings.Join(args, " "), code, stderr)
		}
		if !strings.HasPrefix(stderr, "oprov: ") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("oprov %s: stderr should be one 'oprov: ...' line, got %q", strings.Join(args, " "), stderr)
		}
	}
}

func TestFailuresExitOne(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "push", dir, "oci-layout:"+dir+"/out")
	if code != exitError || !strings.Contains(stderr, "holds no .zip files") {
		t.Errorf("empty release dir: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = runCLI(t, "inspect", "oci-layout:"+dir+"/missing")
	if code != exitError || !strings.Contains(stderr, "not an OCI image layout") {
		t.Errorf("missing layout: exit %d, stderr %q", code, stderr)
	}
}
