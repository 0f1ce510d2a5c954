package tests

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// counterConfig uses examples/counter beside examples/hello (helloConfig's required_providers
// gains counter through withCounter).
const counterConfig = `
resource "counter_tally" "fruit" {
  items = ["apple", "pear", "fig"]
  rule {
    name = "ripe"
  }
}

output "total" {
  value = tostring(counter_tally.fruit.total)
}
`

// TestSchemaMatchesTofu: for a protocol-6 provider (examples/hello) and a protocol-5 one
// (examples/counter), oprov schema -o json equals the provider's entry in tofu providers schema
// -json.
func TestSchemaMatchesTofu(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, withCounter(helloConfig))
	mustOprov(t, f.env, "push", counterRelease(t), f.reg.Host+"/providers/acme/counter", "--sign", "--key", filepath.Join(f.keys, "cosign.key"))
	mustOprov(t, append(f.env, "OPROV_TOFU="+tofu), "init", "-C", f.cfg)
	var fromTofu map[string]any
	tofuJSON(t, tofu, f.cfg, f.env, &fromTofu, "providers", "schema", "-json")
	tofuSchemas := fromTofu["provider_schemas"].(map[string]any)

	for _, tc := range []struct{ typ, protocol string }{{"hello", "6"}, {"counter", "5"}} {
		t.Run(tc.typ, func(t *testing.T) {
			addr := "example.com/acme/" + tc.typ
			r := mustOprov(t, f.env, "schema", f.reg.Host+"/providers/acme/"+tc.typ+":1.0.0", "--address", addr, "--key", filepath.Join(f.keys, "cosign.pub"), "-o", "json")
			var mine map[string]any
			decodeJSON(t, r.Stdout, &mine)
			if mine["format_version"] != fromTofu["format_version"] {
				t.Errorf("format_version %v, tofu's %v", mine["format_version"], fromTofu["format_version"])
			}
			got := mine["provider_schemas"].(map[string]any)[addr]
			want := tofuSchemas[addr]
			if want == nil {
				t.Fatalf("tofu's schema has no %s", addr)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.MarshalIndent(got, "", "  ")
				w, _ := json.MarshalIndent(want, "", "  ")
				t.Errorf("oprov schema differs from tofu's for %s:\n--- oprov\n%s\n--- tofu\n%s", addr, g, w)
			}
			text := mustOprov(t, f.env, "schema", f.reg.Host+"/providers/acme/"+tc.typ+":1.0.0", "--address", addr).Stdout
			if !strings.Contains(text, "plugin protocol "+tc.protocol) {
				t.Errorf("text output does not name protocol %s:\n%s", tc.protocol, text)
			}
		})
	}
}

// withCounter adds examples/counter to a hello configuration.
func withCounter(cfg string) string {
	return strings.Replace(cfg, "  required_providers {\n", "  required_providers {\n    counter = {\n      source  = \"example.com/acme/counter\"\n      version = \"1.0.0\"\n    }\n", 1) + counterConfig
}
