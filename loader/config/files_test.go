package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/tofufiles"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadRequirementsFollowsLocalModules(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"main.tf": `terraform {
  required_providers {
    hello = { source = "example.com/acme/hello", version = "~> 1.0" }
    null = "~> 3.0" # the legacy form: a version, the source taken from the name
  }
}
module "net" { source = "./modules/net" }
module "remote" { source = "git::https://example.com/mod.git" }
`,
		"modules/net/main.tf": `terraform {
  required_providers {
    hello = { source = "example.com/acme/hello", version = ">= 1.2" }
  }
}
module "up" { source = "../.." }
`,
	})
	reqs, _, err := module.Local(dir)
	if err != nil {
		t.Fatal(err)
	}
	hello := reqs["example.com/acme/hello"]
	if hello == nil || hello.ConstraintString() != "~> 1.0, >= 1.2" || len(hello.Where) != 2 {
		t.Fatalf("hello: %+v", hello)
	}
	if null := reqs["registry.opentofu.org/hashicorp/null"]; null == nil || null.ConstraintString() != "~> 3.0" {
		t.Errorf("the legacy version string: %+v (have %v)", null, reqs)
	}
	if len(reqs) != 2 {
		t.Errorf("requirements: %v", reqs)
	}
}

func TestReadRequirementsRefusesBadInput(t *testing.T) {
	for name, tf := range map[string]string{
		"bad syntax":     `terraform { required_providers {`,
		"bad address":    `terraform { required_providers { x = { source = "not//valid" } } }`,
		"source missing": `terraform { required_providers { x = { version = "1.0" } } }`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"main.tf": tf})
			if _, _, err := module.Local(dir); err == nil || !strings.Contains(err.Error(), "main.tf") {
				t.Errorf("got %v, want an error naming main.tf", err)
			}
		})
	}
}

const lockText = `# This file is maintained automatically by "tofu init".
# Manual edits may be lost in future updates.

provider "registry.opentofu.org/hashicorp/null" {
  version = "3.2.1"
  hashes = [
    "h1:keep/this/byte/for/byte=",
  ]
}

provider "example.com/acme/hello" {
  version     = "1.0.0"
  constraints = "~> 1.0"
  hashes = [
    "h1:old=",
    "zh:0000",
  ]
}
`

func TestLockKeepsWhatItDoesNotSet(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{LockFileName: lockText})
	l, err := ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := l.Entries["example.com/acme/hello"]
	if e == nil || e.Version != "1.0.0" || !e.Has("zh:0000") || !e.HasScheme("h1:") || e.HasScheme("zh:1") {
		t.Fatalf("entry: %+v", e)
	}
	if l.Changed() {
		t.Error("a lock just read says it changed")
	}
	l.Set(&LockEntry{Addr: "example.com/acme/hello", Version: "1.1.0", Constraints: "~> 1.0", Hashes: []string{"zh:1111", "h1:new="}})
	l.Set(&LockEntry{Addr: "example.com/acme/bye", Version: "0.1.0", Hashes: []string{"zh:2222"}})
	if !l.Changed() {
		t.Error("Set did not mark the lock changed")
	}
	if err := l.Write(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, LockFileName))
	text := string(data)
	if !strings.Contains(text, `provider "registry.opentofu.org/hashicorp/null" {
  version = "3.2.1"
  hashes = [
    "h1:keep/this/byte/for/byte=",
  ]
}`) {
		t.Errorf("an entry oprov did not set was rewritten:\n%s", text)
	}
	if strings.Contains(text, "h1:old=") || !strings.Contains(text, `"h1:new="`) || !strings.Contains(text, `provider "example.com/acme/bye"`) {
		t.Errorf("the new entries are not what was set:\n%s", text)
	}
	again, err := ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e := again.Entries["example.com/acme/hello"]; e == nil || e.Version != "1.1.0" || len(e.Hashes) != 2 {
		t.Errorf("read back: %+v", e)
	}
}

func TestReadLockRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{LockFileName: "provider \"example.com/acme/hello\" {\n  version = 1\n"})
	if _, err := ReadLock(dir); err == nil || !strings.Contains(err.Error(), LockFileName) {
		t.Errorf("got %v, want an error naming the lock file", err)
	}
	empty, err := ReadLock(t.TempDir())
	if err != nil || len(empty.Entries) != 0 {
		t.Errorf("a missing lock file: %v, %v", empty, err)
	}
}

func TestLoadConfigAndWhatItSelects(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{FileName: `oci_mirror {
  repository_template = "registry.example.com/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
  exclude             = ["example.com/acme/legacy"]
}
provider "example.com/acme/internal" {
  source = "./internal"
}
`})
	cfg, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	hello := mustAddr(t, "example.com/acme/hello")
	m := cfg.MirrorFor(hello)
	if m == nil || cfg.MirrorFor(mustAddr(t, "example.com/acme/legacy")) != nil || cfg.MirrorFor(mustAddr(t, "example.com/other/x")) != nil {
		t.Fatalf("MirrorFor selects the wrong providers: %+v", m)
	}
	if ref, err := m.RepositoryRef(hello); err != nil || ref.Repo() != "registry.example.com/providers/acme/hello" {
		t.Errorf("RepositoryRef: %v, %v", ref, err)
	}
	sp := cfg.SourceFor(mustAddr(t, "example.com/acme/internal"))
	if sp == nil || sp.LocalDir().Dir != filepath.Join(dir, "internal") || cfg.SourceFor(hello) != nil {
		t.Errorf("SourceFor: %+v", sp)
	}
	want := `provider_installation {
  oci_mirror {
    repository_template = "registry.example.com/providers/${namespace}/${type}"
    include             = ["example.com/acme/*"]
    exclude             = ["example.com/acme/legacy"]
  }
  direct {
    exclude = ["example.com/acme/*"]
  }
}
`
	if got := cfg.MirrorInstallation().String(); got != want {
		t.Errorf("MirrorCLIConfig:\n%s\nwant:\n%s", got, want)
	}
	if _, err := LoadConfig(t.TempDir()); err == nil || !strings.Contains(err.Error(), FileName) {
		t.Errorf("a directory without %s: %v", FileName, err)
	}
}

func mustAddr(t *testing.T, s string) manifest.ProviderAddress {
	t.Helper()
	a, err := manifest.ParseProviderAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestNormalizeConstraints: lock constraints come out as Terraform requires them.
func TestNormalizeConstraints(t *testing.T) {
	for in, want := range map[string]string{
		">= 1.0":        ">= 1.0.0",
		"~> 1.0":        "~> 1.0",
		"~>1.2.3":       "~> 1.2.3",
		"1.2":           "1.2.0",
		">= 1, < 2.1":   ">= 1.0.0, < 2.1.0",
		"= 1.0.0-beta1": "= 1.0.0-beta1",
		"!= 1.1-rc1":    "!= 1.1.0-rc1",
		">= 1.0.0,<=3":  ">= 1.0.0, <= 3.0.0",
	} {
		if got := tofufiles.NormalizeConstraints(in); got != want {
			t.Errorf("NormalizeConstraints(%q) = %q, want %q", in, got, want)
		}
	}
}
