package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A far side's configuration takes oci_mirror, sandbox and host blocks; a block that means
// nothing there, a host block out of range, or no oci_mirror block is an error at its line.
func TestLoadHostConfig(t *testing.T) {
	mirror := "oci_mirror {\n  repository_template = \"r.example.com/p/${namespace}/${type}\"\n  include = [\"example.com/acme/*\"]\n}\n"
	for name, c := range map[string]struct{ src, want string }{
		"ok":         {mirror + "sandbox \"*\" {\n  env = [\"AWS_*\"]\n  read = [\"~/.aws\"]\n}\nhost {\n  cache_limit = \"4GiB\"\n  streams = 4\n}\n", ""},
		"remote":     {mirror + "remote \"*\" {\n  command = [\"ssh\"]\n}\n", "host.hcl:5"},
		"no mirror":  {"sandbox \"*\" {}\n", "no oci_mirror block"},
		"streams":    {mirror + "host {\n  streams = 0\n}\n", "host.hcl:5: host: streams = 0"},
		"cache size": {mirror + "host {\n  cache_limit = \"10\"\n}\n", "host.hcl:5: host: cache_limit"},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "host.hcl")
			if err := os.WriteFile(p, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			hc, err := LoadHostConfig(p)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if hc.CacheLimit != 4<<30 || hc.Streams != 4 || len(hc.Sandboxes) != 1 || hc.Sandboxes[0].Written.Read[0] != "~/.aws" {
					t.Errorf("read %+v", hc)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}
