package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaSaysTheAddressItGuessed: without --address, schema says on stderr which address it
// assumed and how to give another (a guess may name the public registry for an in-house provider).
func TestSchemaSaysTheAddressItGuessed(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "terraform-provider-hello")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, _ := runCLI(t, "schema", exe)
	if !strings.Contains(stderr, "/hello, guessed from "+exe) || !strings.Contains(stderr, "give --address HOST/NAMESPACE/TYPE") {
		t.Errorf("schema without --address does not say what it assumed: %q", stderr)
	}
	_, stderr, _ = runCLI(t, "schema", exe, "--address", "example.com/acme/hello")
	if strings.Contains(stderr, "guessed") {
		t.Errorf("schema with --address still guessed: %q", stderr)
	}
}

// TestSchemaOfALayoutSuggestsAddress: an oci-layout directory's name need not be the provider's
// type. When the guess from it finds no executable, schema says to give --address, with the type
// the package does hold (exit 2), rather than only that a cache directory lacks a file.
func TestSchemaOfALayoutSuggestsAddress(t *testing.T) {
	repo, _ := pushedLayout(t)
	dir := strings.TrimPrefix(repo, "oci-layout:")
	renamed := filepath.Join(filepath.Dir(dir), "layout")
	if err := os.Rename(dir, renamed); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPROV_CACHE_DIR", t.TempDir())
	_, stderr, code := runCLI(t, "schema", "oci-layout:"+renamed+":1.0.0")
	if code != exitUsage || !strings.Contains(stderr, "give --address HOST/NAMESPACE/hello") || !strings.Contains(stderr, `the guess "layout" was wrong`) {
		t.Errorf("schema of a layout named layout: exit %d, want 2 and --address HOST/NAMESPACE/hello:\n%s", code, stderr)
	}
}
