package stdiohost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
)

// hooksProvider has the validate and plan capabilities: validate refuses a name with a space
// (and records what it saw), plan sets "note" from the name.
const hooksProvider = `import json, os, sys
A = {"name": {"type": "string", "required": True}, "note": {"type": "string", "computed": True}}
for line in sys.stdin:
    r = json.loads(line); p = r.get("params", {}); res = {}
    if r["method"] == "initialize":
        res = {"protocol_version": "1", "capabilities": {"validate": True, "plan": True}, "schema": {"resources": {"h_x": {"attributes": A}}}}
    elif r["method"] == "validate":
        open(os.path.join(os.environ["OPROV_PROVIDER_DIR"], "seen.json"), "w").write(json.dumps(p["config"]))
        if isinstance(p["config"]["name"], str) and " " in p["config"]["name"]:
            print(json.dumps({"jsonrpc": "2.0", "id": r["id"], "error": {"code": 1, "message": "no spaces", "data": {"path": ["name"]}}}), flush=True)
            continue
    elif r["method"] == "plan":
        n = p["proposed"]["name"]
        res = {"planned": {"note": n if isinstance(n, dict) else "planned-" + n}}
    print(json.dumps({"jsonrpc": "2.0", "id": r["id"], "result": res}), flush=True)
`

func TestHooksSeeUnknowns(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.py"), []byte(hooksProvider), 0o644)
	os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"type": "h", "command": ["python3", "p.py"]}`), 0o644)
	h, err := newHost(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	s, err := h.ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := s.resources["h_x"]
	unknown, _ := encodeDV(cty.ObjectVal(map[string]cty.Value{"name": cty.UnknownVal(cty.String), "note": cty.NullVal(cty.String)}), b.ty)
	v, _ := h.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: "h_x", Config: unknown})
	if len(v.Diagnostics) != 0 {
		t.Errorf("validate of an unknown name: %v", v.Diagnostics)
	}
	if seen, _ := os.ReadFile(filepath.Join(dir, "seen.json")); string(seen) != `{"name": {"$unknown": true}, "note": null}` {
		t.Errorf("validate saw %s", seen)
	}
	spaced, _ := encodeDV(cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("a b"), "note": cty.NullVal(cty.String)}), b.ty)
	v, _ = h.ValidateResourceConfig(ctx, &tfprotov6.ValidateResourceConfigRequest{TypeName: "h_x", Config: spaced})
	if len(v.Diagnostics) != 1 || v.Diagnostics[0].Summary != "no spaces" || !strings.Contains(v.Diagnostics[0].Attribute.String(), "name") {
		t.Errorf("validate of a spaced name: %+v", v.Diagnostics)
	}
	cfg, _ := encodeDV(cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("n"), "note": cty.NullVal(cty.String)}), b.ty)
	null, _ := encodeDV(cty.NullVal(b.ty), b.ty)
	pr, _ := h.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: "h_x", PriorState: null, Config: cfg, ProposedNewState: cfg})
	planned, err := decodeDV(pr.PlannedState, b.ty)
	if err != nil || len(pr.Diagnostics) != 0 || planned.GetAttr("note").AsString() != "planned-n" {
		t.Errorf("plan hook: %v %v %#v", err, pr.Diagnostics, planned)
	}
}
