package loader_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/bundle"
)

func TestBundleWants(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.tf", `terraform {
  required_providers {
    hello = { source = "example.com/acme/hello", version = "~> 1.0" }
    time  = { source = "hashicorp/time" }
  }
}
`)
	write("oprov.hcl", `oci_mirror {
  repository_template = "registry.example.com/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
}
`)
	write(".terraform.lock.hcl", `provider "registry.opentofu.org/hashicorp/time" {
  version = "0.9.1"
  hashes  = ["zh:aaaa"]
}
`)
	wants, err := bundleWants(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(wants) != 2 || wants[0].Addr.String() != "example.com/acme/hello" || wants[1].Addr.String() != "registry.opentofu.org/hashicorp/time" {
		t.Fatalf("wants: %+v", wants)
	}
	hello, tm := wants[0], wants[1]
	if hello.OCI == nil || hello.Constraints != "~> 1.0" || hello.LockedVersion != "" {
		t.Errorf("hello: %+v", hello)
	}
	if ref, err := hello.OCI.RepoFor(hello.Addr); err != nil || ref.Repo() != "registry.example.com/providers/acme/hello" {
		t.Errorf("hello's repository: %v %v", ref, err)
	}
	if tm.OCI != nil || tm.LockedVersion != "0.9.1" || len(tm.LockedHashes) != 1 {
		t.Errorf("time: %+v", tm)
	}

	write("oprov.hcl", "provider \"example.com/acme/hello\" {\n  source = \"./hello\"\n}\n")
	if _, err := bundleWants(dir); err == nil || !strings.Contains(err.Error(), "kept as source") {
		t.Errorf("a provider kept as source: %v", err)
	}
}

// bundleWants is what save --config wants of a configuration.
func bundleWants(dir string) ([]bundle.Want, error) {
	wants, _, err := loader.BundleWantsModules(context.Background(), dir, loader.Options{})
	return wants, err
}
