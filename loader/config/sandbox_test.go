package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
)

const sandboxHCL = `provider "example.com/acme/hello" {
  source = "./hello"
}
sandbox "*" {}
sandbox "example.com/acme/*" {
  read        = ["/etc/acme", "./data", "~/.acme"]
  write       = ["/var/tmp/acme"]
  execute     = ["/usr/bin/git"]
  connect     = [443, 8443]
  env         = ["ACME_TOKEN", "AWS_*"]
  memory      = "512MiB"
  processes   = 64
  open_files  = 1024
  cpu_time    = "5m"
  best_effort = true
}
sandbox "example.com/acme/hello" {
  connect = [80]
}
`

func TestParseSandbox(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	cfg, err := parseConfig("/cfg/oprov.hcl", []byte(sandboxHCL))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sandboxes) != 3 {
		t.Fatalf("sandboxes: %d", len(cfg.Sandboxes))
	}
	s := cfg.Sandboxes[1]
	if strings.Join(s.Read, " ") != "/etc/acme "+filepath.FromSlash("/cfg/data")+" /home/u/.acme" || s.Write[0] != "/var/tmp/acme" || s.Execute[0] != "/usr/bin/git" {
		t.Errorf("paths: %+v", s)
	}
	if len(s.Connect) != 2 || s.Connect[1] != 8443 || s.Memory != 512<<20 || s.Processes != 64 || s.OpenFiles != 1024 || s.CPUSeconds != 300 || !s.BestEffort {
		t.Errorf("ports and limits: %+v", s)
	}
	for addr, want := range map[string]string{"example.com/acme/hello": "example.com/acme/hello", "example.com/acme/other": "example.com/acme/*", "example.com/beta/x": "*"} {
		a, _ := manifest.ParseProviderAddress(addr)
		if got := cfg.SandboxFor(a); got == nil || got.Label != want {
			t.Errorf("SandboxFor(%s) = %+v, want the block %q", addr, got, want)
		}
	}
	none, _ := parseConfig("/cfg/oprov.hcl", []byte("provider \"example.com/acme/hello\" {\n  source = \"./hello\"\n}\n"))
	if a, _ := manifest.ParseProviderAddress("example.com/acme/hello"); none.SandboxFor(a) != nil {
		t.Error("a configuration without sandbox blocks sandboxes a provider")
	}
}

func TestParseSandboxErrors(t *testing.T) {
	for body, want := range map[string]string{
		`sandbox "x" {}`:                         `sandbox "x"`,
		"sandbox \"*\" {\n connect = [0]\n}":     "not a TCP port",
		"sandbox \"*\" {\n connect = [70000]\n}": "not a TCP port",
		"sandbox \"*\" {\n memory = \"lots\"\n}": "512MiB",
		"sandbox \"*\" {\n memory = \"1KiB\"\n}": "1MiB or more",
		"sandbox \"*\" {\n cpu_time = \"5\"\n}":  "duration",
		"sandbox \"*\" {\n processes = 0\n}":     "positive",
		"sandbox \"*\" {\n env = [\"A=B\"]\n}":   "not a variable name",
		"sandbox \"*\" {\n env = [\"*\"]\n}":     "not a variable name",
		"sandbox \"*\" {\n read = [\"\"]\n}":     "empty path",
		"sandbox \"*\" {}\nsandbox \"*/*/*\" {}": "declared twice",
		"sandbox \"*\" {\n bogus = 1\n}":         "bogus",
	} {
		_, err := parseConfig("/cfg/oprov.hcl", []byte("provider \"example.com/acme/hello\" {\n  source = \"./hello\"\n}\n"+body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", body, err, want)
		}
	}
}

func FuzzParseSandbox(f *testing.F) {
	f.Add(sandboxHCL)
	f.Add("sandbox \"*\" {\n memory = \"1.5GiB\"\n cpu_time = \"90s\"\n}")
	f.Fuzz(func(t *testing.T, src string) {
		cfg, err := parseConfig("/cfg/oprov.hcl", []byte(src))
		if err != nil {
			return
		}
		for _, s := range cfg.Sandboxes {
			for _, p := range append(append(s.Read, s.Write...), s.Execute...) {
				if !filepath.IsAbs(p) {
					t.Fatalf("sandbox path %q is not absolute", p)
				}
			}
		}
	})
}
