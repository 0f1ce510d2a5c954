package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/module"
)

func TestParseConfig(t *testing.T) {
	src := `
oci_mirror {
  repository_template = "registry.example.com/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
  exclude             = ["example.com/acme/legacy"]
}

oci_mirror {
  repository_template = "127.0.0.1:5000/${hostname}/${namespace}/${type}"
  include             = ["*/*/*"]
}
`
	cfg, err := parseConfig("oprov.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	hello, _ := manifest.ParseProviderAddress("example.com/acme/hello")
	legacy, _ := manifest.ParseProviderAddress("example.com/acme/legacy")
	random, _ := manifest.ParseProviderAddress("hashicorp/random")
	if m := cfg.MirrorFor(hello); m != cfg.Mirrors[0] || m.Repository(hello) != "registry.example.com/providers/acme/hello" {
		t.Errorf("hello: %v", m)
	}
	if m := cfg.MirrorFor(legacy); m != cfg.Mirrors[1] || m.Repository(legacy) != "127.0.0.1:5000/example.com/acme/legacy" {
		t.Errorf("legacy (excluded from the first block): %v", m)
	}
	if m := cfg.MirrorFor(random); m != cfg.Mirrors[1] {
		t.Errorf("random: %v", m)
	}
	for name, bad := range map[string]struct{ src, want string }{
		"unknown variable": {"oci_mirror {\n  repository_template = \"r.io/${owner}/${type}\"\n  include = [\"a/b\"]\n}\n", "oprov.hcl:2: oci_mirror: repository_template"},
		"bad pattern":      {"\noci_mirror {\n  repository_template = \"r.io/${type}\"\n  include = [\"a*/b\"]\n}\n", "oprov.hcl:2: oci_mirror include"},
		"missing include":  {"oci_mirror {\n  repository_template = \"r.io/${type}\"\n}\n", "oprov.hcl:1"},
		"unknown attr":     {"oci_mirror {\n  repository_template = \"r.io/${type}\"\n  include = [\"a/b\"]\n  colour = \"red\"\n}\n", "oprov.hcl:4"},
		"syntax":           {"oci_mirror {\n", "oprov.hcl:"},
		"empty":            {"", "no oci_mirror or provider blocks"},
		"absolute source":  {"provider \"example.com/a/b\" {\n  source = \"/abs\"\n}\n", "oprov.hcl:1: provider \"example.com/a/b\": source \"/abs\" must be a relative path"},
		"source twice":     {"provider \"example.com/a/b\" {\n  source = \"./x\"\n}\nprovider \"example.com/a/b\" {\n  source = \"./y\"\n}\n", "oprov.hcl:4: provider \"example.com/a/b\" is declared twice"},
		"missing key":      {"oci_mirror {\n  repository_template = \"r.io/${type}\"\n  include = [\"a/b\"]\n  public_keys = [\"nope.pub\"]\n}\n", "nope.pub"},
	} {
		if _, err := parseConfig("oprov.hcl", []byte(bad.src)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want %q", name, err, bad.want)
		}
	}
}

func TestReadRequirements(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
	}
	write("main.tf", `
terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = "~> 1.0"
      configuration_aliases = [hello.alt]
    }
    random = "3.6.0"
  }
}
module "net" {
  source = "./modules/net"
}
module "remote" {
  source = "git::https://example.com/x.git"
}
`)
	write("modules/net/versions.tf", `
terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = ">= 1.0.1"
    }
  }
}
module "back" {
  source = "../.."
}
`)
	reqs, _, err := module.Local(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := reqs["example.com/acme/hello"]
	if h == nil || h.ConstraintString() != "~> 1.0, >= 1.0.1" || len(h.Where) != 2 {
		t.Fatalf("hello: %+v", h)
	}
	if r := reqs["registry.opentofu.org/hashicorp/random"]; r == nil || r.ConstraintString() != "3.6.0" {
		t.Errorf("random (legacy form): %+v", r)
	}
	write("bad.tf", "terraform {\n  required_providers {\n    x = { source = var.s }\n  }\n}\n")
	if _, _, err := module.Local(dir); err == nil || !strings.Contains(err.Error(), "bad.tf:3") {
		t.Errorf("non-literal source: %v", err)
	}
}

func TestLockKeepsOtherEntriesByteForByte(t *testing.T) {
	dir := t.TempDir()
	orig := `# This file is maintained automatically by "tofu init".
# Manual edits may be lost in future updates.

provider "registry.opentofu.org/hashicorp/random" {
  version     = "3.6.0"
  constraints = "3.6.0"
  hashes = [
    "h1:AAAA=",   # an odd comment that tofu would not write
    "zh:0000",
  ]
}

provider "example.com/acme/hello" {
  version = "0.9.0"
  hashes = ["h1:old="]
}

provider "registry.opentofu.org/hashicorp/time" {
  version = "0.1.0"
  hashes  = ["h1:T="]
}
`
	os.WriteFile(filepath.Join(dir, LockFileName), []byte(orig), 0o644)
	l, err := ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e := l.Entries["example.com/acme/hello"]; e == nil || e.Version != "0.9.0" || !e.Has("h1:old=") {
		t.Fatalf("read: %+v", e)
	}
	l.Set(&LockEntry{Addr: "example.com/acme/hello", Version: "1.0.0", Constraints: "~> 1.0", Hashes: []string{"zh:bb", "h1:aa=", "zh:bb"}})
	l.Set(&LockEntry{Addr: "example.com/acme/new", Version: "2.0.0", Hashes: []string{"h1:n="}})
	if err := l.Write(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, LockFileName))
	// Blocks oprov sets are written as tofu init writes them (hclwrite): "version" is aligned
	// with "constraints" when there is one, and stands alone when there is none.
	want := strings.Replace(orig, `provider "example.com/acme/hello" {
  version = "0.9.0"
  hashes = ["h1:old="]
}`, `provider "example.com/acme/hello" {
  version     = "1.0.0"
  constraints = "~> 1.0"
  hashes = [
    "h1:aa=",
    "zh:bb",
  ]
}`, 1) + `
provider "example.com/acme/new" {
  version = "2.0.0"
  hashes = [
    "h1:n=",
  ]
}
`
	if string(got) != want {
		t.Errorf("lock file:\n%s\nwant:\n%s", got, want)
	}
	again, err := ReadLock(dir)
	if err != nil || len(again.Entries) != 4 || again.Entries["example.com/acme/new"].Version != "2.0.0" {
		t.Errorf("re-read: %v %+v", err, again.Entries)
	}
}
