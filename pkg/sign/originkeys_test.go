package sign

import (
	"strings"
	"testing"
)

// TestPolicyOriginKeys: origin_keys takes full OpenPGP fingerprints (spaces allowed, any case)
// and is enough for a rule; a key ID or anything else is refused naming the fix.
func TestPolicyOriginKeys(t *testing.T) {
	src := `trust "hashicorp" {
  providers   = ["registry.opentofu.org/hashicorp/*"]
  origin_keys = ["c874 011f 0ab4 0511 0d02  1055 3436 5d94 72d7 468f"]
}
`
	p, err := parsePolicy("policy.hcl", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := p.Match("", "registry.opentofu.org/hashicorp/null")
	if r == nil || len(r.OriginKeys) != 1 || r.OriginKeys[0] != "C874011F0AB405110D02105534365D9472D7468F" {
		t.Fatalf("rule %+v", r)
	}
	for _, bad := range []string{"34365D9472D7468F", "not a key", strings.Repeat("G", 40)} {
		src := "trust \"x\" {\n  providers = [\"a/b/c\"]\n  origin_keys = [\"" + bad + "\"]\n}\n"
		if _, err := parsePolicy("policy.hcl", []byte(src), nil); err == nil || !strings.Contains(err.Error(), "not an OpenPGP fingerprint") {
			t.Errorf("origin_keys %q: %v", bad, err)
		}
	}
}
