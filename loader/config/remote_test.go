package config

import (
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
)

// The most specific remote block selects a provider, as sandbox blocks do; a provider no block
// selects runs here.
func TestRemoteFor(t *testing.T) {
	cfg, err := parseConfig("/cfg/oprov.hcl", []byte(`provider "example.com/acme/hello" {
  source = "./hello"
}
remote "*" {
  command = ["ssh", "-T", "any@bastion", "oprov", "provider", "host", "--stdio"]
}
remote "example.com/acme/hello" {
  command = ["kubectl", "exec", "-i", "deploy/runner", "--", "oprov", "provider", "host", "--stdio"]
}
remote "example.com/other/*" {
  command = ["docker", "exec", "-i", "runner", "oprov", "provider", "host", "--stdio"]
}
`))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"example.com/acme/hello": "kubectl", "example.com/other/x": "docker", "example.com/acme/y": "ssh",
	} {
		a, _ := manifest.ParseProviderAddress(addr)
		if r := cfg.RemoteFor(a); r == nil || r.Command[0] != want {
			t.Errorf("%s: %+v, want %s", addr, r, want)
		}
	}
	none, _ := parseConfig("/cfg/oprov.hcl", []byte("provider \"example.com/acme/hello\" {\n  source = \"./hello\"\n}\n"))
	if r := none.RemoteFor(manifest.ProviderAddress{Hostname: "example.com", Namespace: "acme", Type: "hello"}); r != nil {
		t.Errorf("no remote block, yet %+v", r)
	}
}

// A remote block without a command, with a bad pattern, or declared twice is refused at its line.
func TestRemoteBlockErrors(t *testing.T) {
	head := "provider \"example.com/acme/hello\" {\n  source = \"./hello\"\n}\n"
	for hcl, want := range map[string]string{
		"remote \"*\" {\n  command = []\n}\n":                                                    "oprov.hcl:4: remote \"*\": command is empty",
		"remote \"a/b/c/d\" {\n  command = [\"ssh\"]\n}\n":                                       "oprov.hcl:4: remote \"a/b/c/d\"",
		"remote \"*\" {\n  command = [\"ssh\"]\n}\nremote \"*/*/*\" {\n  command = [\"x\"]\n}\n": "declared twice",
		"remote \"*\" {\n  command = [\"ssh\"]\n  hello_timeout = \"soon\"\n}\n":                 "oprov.hcl:4: remote \"*\": hello_timeout = \"soon\": give a duration from 1s to 30m0s",
		"remote \"*\" {\n  command = [\"ssh\"]\n  hello_timeout = \"10ms\"\n}\n":                 "hello_timeout = \"10ms\"",
		"remote \"*\" {\n  command = [\"ssh\"]\n  hello_timeout = \"2h\"\n}\n":                   "hello_timeout = \"2h\"",
	} {
		_, err := parseConfig("/cfg/oprov.hcl", []byte(head+hcl))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", hcl, err, want)
		}
	}
}

// hello_timeout bounds the wait for the far side's hello; without it, oprov's default applies.
func TestRemoteHelloTimeout(t *testing.T) {
	head := "provider \"example.com/acme/hello\" {\n  source = \"./hello\"\n}\n"
	cfg, err := parseConfig("/cfg/oprov.hcl", []byte(head+"remote \"*\" {\n  command = [\"ssh\"]\n  hello_timeout = \"45s\"\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Remotes[0].HelloTimeout; got.String() != "45s" {
		t.Errorf("hello_timeout = %s", got)
	}
	cfg, err = parseConfig("/cfg/oprov.hcl", []byte(head+"remote \"*\" {\n  command = [\"ssh\"]\n}\n"))
	if err != nil || cfg.Remotes[0].HelloTimeout != 0 {
		t.Errorf("no hello_timeout: %v, %v", err, cfg.Remotes)
	}
}
