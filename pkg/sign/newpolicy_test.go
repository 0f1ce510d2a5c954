package sign

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewPolicy: keys (files relative to the file that names them, or PEM inline) become one
// enforcing rule for everything; a policy file is loaded relative to the same file; both at once,
// or a missing key, are refused; neither is no policy.
func TestNewPolicy(t *testing.T) {
	dir := t.TempDir()
	_, pub := testKeys(t, "acme")
	pemData, err := os.ReadFile(pub.Name)
	if err != nil {
		t.Fatal(err)
	}
	writeFile := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("acme.pub", string(pemData))
	writeFile("policy.hcl", "trust \"acme\" {\n  providers = [\"example.com/acme/*\"]\n  keys = [\"acme.pub\"]\n  mode = \"warn\"\n}\n")
	base := filepath.Join(dir, "oprov.hcl")

	if p, err := NewPolicy(PolicyFrom{}); p != nil || err != nil {
		t.Errorf("neither keys nor a file: %v, %v; want no policy", p, err)
	}
	if _, err := NewPolicy(PolicyFrom{Keys: []string{"acme.pub"}, File: "policy.hcl", Base: base}); !errors.Is(err, ErrKeysAndPolicy) {
		t.Errorf("keys and a file: %v, want ErrKeysAndPolicy", err)
	}

	p, err := NewPolicy(PolicyFrom{Keys: []string{"acme.pub", string(pemData)}, Base: base, Rule: "oci_mirror at oprov.hcl:1", KeysName: "public_keys"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Path != base || p.Mode != ModeEnforce || len(p.Rules) != 1 {
		t.Fatalf("keys policy %+v", p)
	}
	r := p.Rules[0]
	if r.Name != "oci_mirror at oprov.hcl:1" || r.Mode != ModeEnforce || len(r.Keys) != 2 || r.Keys[0].Hint != pub.Hint || r.Keys[1].Name != "public_keys[1]" {
		t.Errorf("keys rule %+v", r)
	}
	for _, c := range [][2]string{{"registry.example.com/any/repo", ""}, {"", "example.com/x/y"}, {"r.io/a", "example.com/x/y"}} {
		if p.Match(c[0], c[1]) != r {
			t.Errorf("the keys rule does not cover %q %q", c[0], c[1])
		}
	}

	// From the command line: paths as given, and the flag names the policy.
	t.Chdir(dir)
	if p, err = NewPolicy(PolicyFrom{Keys: []string{"acme.pub"}, Rule: "--key"}); err != nil || p.Path != "--key" || p.Rules[0].Name != "--key" {
		t.Errorf("--key policy %+v, %v", p, err)
	}
	if _, err := NewPolicy(PolicyFrom{Keys: []string{"missing.pub"}, Rule: "--key"}); err == nil || !strings.Contains(err.Error(), "missing.pub") {
		t.Errorf("a missing key: %v, want an error naming it", err)
	}

	p, err = NewPolicy(PolicyFrom{File: "policy.hcl", Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if p.Path != filepath.Join(dir, "policy.hcl") || len(p.Rules) != 1 || p.Rules[0].Name != "acme" || p.Rules[0].Mode != ModeWarn {
		t.Errorf("policy file %+v", p)
	}
	if _, err := NewPolicy(PolicyFrom{File: "nope.hcl", Base: filepath.Join(t.TempDir(), "oprov.hcl")}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing policy file relative to another base: %v, want not-exist", err)
	}
}
