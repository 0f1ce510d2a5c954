package recording

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// thingSchema is x_thing's schema as its provider sends it: name (required), id (computed), a
// list of rule blocks (port required, rid computed), a set of tag blocks (key required, tid
// computed) and an optional block (a single block).
func thingSchema(t *testing.T) ([]byte, *plugin.ProviderSchema) {
	t.Helper()
	attr := func(name, typ string, req, comp bool) *tfplugin6.Schema_Attribute {
		return &tfplugin6.Schema_Attribute{Name: name, Type: []byte(typ), Required: req, Optional: !req && !comp, Computed: comp}
	}
	wire, err := proto.Marshal(&tfplugin6.GetProviderSchema_Response{
		Provider: &tfplugin6.Schema{Block: &tfplugin6.Schema_Block{}},
		ResourceSchemas: map[string]*tfplugin6.Schema{"x_thing": {Block: &tfplugin6.Schema_Block{
			Attributes: []*tfplugin6.Schema_Attribute{attr("name", `"string"`, true, false), attr("id", `"string"`, false, true)},
			BlockTypes: []*tfplugin6.Schema_NestedBlock{
				{TypeName: "rule", Nesting: tfplugin6.Schema_NestedBlock_LIST, Block: &tfplugin6.Schema_Block{
					Attributes: []*tfplugin6.Schema_Attribute{attr("port", `"number"`, true, false), attr("rid", `"string"`, false, true)}}},
				{TypeName: "tag", Nesting: tfplugin6.Schema_NestedBlock_SET, Block: &tfplugin6.Schema_Block{
					Attributes: []*tfplugin6.Schema_Attribute{attr("key", `"string"`, true, false), attr("tid", `"string"`, false, true)}}},
				{TypeName: "opt", Nesting: tfplugin6.Schema_NestedBlock_SINGLE, Block: &tfplugin6.Schema_Block{
					Attributes: []*tfplugin6.Schema_Attribute{attr("v", `"string"`, false, false)}}},
			}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := plugin.SchemaFromWire(6, wire)
	if err != nil {
		t.Fatal(err)
	}
	return wire, s
}

// proposedCase reads JSON values of x_thing and proposes.
func proposedOf(t *testing.T, b block, prior, cfg string) cty.Value {
	t.Helper()
	val := func(s string) cty.Value {
		if s == "" {
			return cty.NullVal(b.ty)
		}
		var j any
		if err := decodeJSON([]byte(s), &j); err != nil {
			t.Fatal(err)
		}
		v, err := (&Value{Value: j}).toCty(b.ty, nil)
		if err != nil {
			t.Fatal(err)
		}
		return configShape(b.b, v)
	}
	v, err := safeProposedNew(b, val(prior), val(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The proposed new state is what OpenTofu sends (objchange.ProposedNew): with no prior state a
// computed attribute the configuration leaves null is null, not unknown (the provider plans it
// unknown); with one, it keeps the prior value, in nested blocks too (lists by index, sets by
// the element the configuration could have made); a delete proposes null.
func TestProposedNewIsWhatTofuProposes(t *testing.T) {
	_, s := thingSchema(t)
	sch, err := newSchemas(s)
	if err != nil {
		t.Fatal(err)
	}
	b := sch.resources["x_thing"]
	show := func(v cty.Value) string {
		rv, err := fromCty(v, b.ty, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(rv)
		return string(out)
	}
	prior := `{"name":"a","id":"x-1","rule":[{"port":80,"rid":"r-1"}],"tag":[{"key":"k","tid":"t-1"},{"key":"j","tid":"t-2"}],"opt":null}`
	for _, c := range []struct{ name, prior, cfg, want string }{
		{"create", "", `{"name":"a","rule":[{"port":80}]}`,
			`{"value":{"id":null,"name":"a","opt":null,"rule":[{"port":80,"rid":null}],"tag":[]}}`},
		{"update keeps computed values", prior, `{"name":"b","rule":[{"port":80},{"port":81}],"tag":[{"key":"k"}],"opt":{"v":"x"}}`,
			`{"value":{"id":"x-1","name":"b","opt":{"v":"x"},"rule":[{"port":80,"rid":"r-1"},{"port":81,"rid":null}],"tag":[{"key":"k","tid":"t-1"}]}}`},
		{"delete", prior, "", `{"value":null}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := show(proposedOf(t, b, c.prior, c.cfg)); got != c.want {
				t.Errorf("proposed:\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// recordedCreate is a recording of x_thing's create, the calls as tofu makes them: the
// configuration with nested blocks, the proposed new state the configuration itself (no prior
// state: computed attributes null), the provider planning id and rid unknown.
func recordedCreate(t *testing.T) string {
	t.Helper()
	wire, s := thingSchema(t)
	p, err := json.Marshal(Line{Provider: "example.com/x/x", Version: "1.0.0", Protocol: 6, Schema: s, SchemaWire: wire})
	if err != nil {
		t.Fatal(err)
	}
	cfg := `{"value":{"id":null,"name":"a","opt":null,"rule":[{"port":80,"rid":null}],"tag":[]}}`
	planned := `{"value":{"id":null,"name":"a","opt":null,"rule":[{"port":80,"rid":null}],"tag":[]},"unknown":[["id"],["rule",0,"rid"]]}`
	done := `{"value":{"id":"x-1","name":"a","opt":null,"rule":[{"port":80,"rid":"r-1"}],"tag":[]}}`
	call := func(rpc, req, resp string) string {
		return `{"provider":"example.com/x/x","call":"` + rpc + `","type":"x_thing","request":` + req + `,"response":` + resp + `}`
	}
	return strings.Join([]string{header, string(p),
		`{"provider":"example.com/x/x","call":"ValidateProviderConfig","request":{"config":{"value":{}}},"response":{}}`,
		`{"provider":"example.com/x/x","call":"ConfigureProvider","request":{"terraform_version":"1.12.0","config":{"value":{}}},"response":{}}`,
		call("ValidateResourceConfig", `{"type_name":"x_thing","config":`+cfg+`}`, `{}`),
		call("PlanResourceChange", `{"type_name":"x_thing","prior_state":{"value":null},"proposed_new_state":`+cfg+`,"config":`+cfg+`}`, `{"planned_state":`+planned+`}`),
		call("ApplyResourceChange", `{"type_name":"x_thing","prior_state":{"value":null},"planned_state":`+planned+`,"config":`+cfg+`}`, `{"new_state":`+done+`}`),
	}, "\n") + "\n"
}

// provider check --json --recording replays the create and the plan it recorded: the driver
// sends what tofu sent (nested blocks left out are empty, computed attributes proposed null).
// A create the recording does not hold is refused with a hint this command can follow: it has
// no --replay-ignore.
func TestDriverReplaysARecordedCreate(t *testing.T) {
	rec, err := Read(strings.NewReader(recordedCreate(t)), "rec.jsonl", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rp, err := rec.replayer("", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := rp.Driver()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan := d.Do(ctx, []byte(`{"call":"plan","type":"x_thing","config":{"name":"a","rule":[{"port":80}]}}`))
	if !plan.OK || len(plan.Unknown) != 2 {
		t.Errorf("the recorded plan: ok=%v unknown=%v %s", plan.OK, plan.Unknown, plan.Error)
	}
	create := d.Do(ctx, []byte(`{"call":"create","type":"x_thing","config":{"name":"a","rule":[{"port":80}]}}`))
	if st, _ := json.Marshal(create.State); !create.OK || !strings.Contains(string(st), `"rid":"r-1"`) {
		t.Errorf("the recorded create: ok=%v state=%s %s", create.OK, st, create.Error)
	}
	other := d.Do(ctx, []byte(`{"call":"create","type":"x_thing","config":{"name":"b","rule":[{"port":80}]}}`))
	if other.OK || !strings.Contains(other.Error, `config.name: recorded "a", now "b"`) ||
		!strings.Contains(other.Error, "Record again with oprov run --record") || strings.Contains(other.Error, "--replay-ignore") {
		t.Errorf("a create the recording does not hold: ok=%v, want a refusal whose hint provider check can follow:\n%s", other.OK, other.Error)
	}
}
