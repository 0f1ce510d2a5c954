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
