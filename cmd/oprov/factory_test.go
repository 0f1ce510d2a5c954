package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/oci"
)

// TestFactorySwapsTheRegistry: a command opens its registry through the injected factory, so a
// test pushes "to a registry" that is an OCI layout, without a network.
func TestFactorySwapsTheRegistry(t *testing.T) {
	ctx := context.Background()
	dist := packageHello(t)
	layout := filepath.Join(t.TempDir(), "layout")
	var opened []oci.Ref
	ios, out, _ := testIO()
	ios.Factory.OpenTarget = func(ctx context.Context, ref oci.Ref, opts oci.Options, create bool) (oci.Target, error) {
		if !create {
			t.Errorf("push opened %s without create", ref)
		}
		opened = append(opened, ref)
		return oci.NewClient(oci.Options{}).Open(ctx, oci.Ref{Layout: layout, Reference: ref.Reference}, create)
	}
	o := &pushOptions{io: ios, Sources: []string{dist}, Repo: "registry.example.com/providers/acme/hello", output: textOut}
	if err := runPush(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(opened) != 1 || opened[0].Registry != "registry.example.com" || opened[0].Repository != "providers/acme/hello" || opened[0].Reference != "1.0.0" {
		t.Fatalf("the factory opened %v", opened)
	}
	if !strings.Contains(out.String(), "to registry.example.com/providers/acme/hello:1.0.0\n") || !strings.Contains(out.String(), "oci_mirror") {
		t.Errorf("push output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(layout, "index.json")); err != nil {
		t.Errorf("nothing reached the swapped-in target: %v", err)
	}
}
