package middleware

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// Attack: a rule that reads a sensitive attribute and fails to evaluate puts CEL's error text in
// the audit (Decision.Error) and in the diagnostic tofu prints. CEL's conversion errors quote the
// value (timestamp(): "invalid RFC 3339 timestamp \"hunter2-secret\""; a map lookup: "no such
// key: ..."), so the sensitive password reaches the
// audit file, which promises every sensitive attribute redacted, and the CI log.
func TestAttackRuleErrorTextCarriesSensitiveValue(t *testing.T) {
	rule := mustRule(t, "pin-length", Deny, `timestamp(planned.password) < timestamp("2030-01-01T00:00:00Z")`, "")
	m, path := newTestMiddleware(t, rule)
	next := func(context.Context, []byte) ([]byte, error) {
		return dynamic(t, nil, planPlannedState, db("main", nil)), nil
	}
	req := dynamic(t, typeName("acme_database"), planPriorState, cty.NullVal(dbType))
	resp, err := m.Unary(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/PlanResourceChange", Protocol: 6, Request: req}, next)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range plugin.WireFields(resp, 4) {
		if strings.Contains(string(d), "hunter2") {
			t.Errorf("the diagnostic tofu prints holds the sensitive password: %q", d)
		}
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "hunter2") {
		t.Errorf("the audit holds the sensitive password:\n%s", data)
	}
}

// Attack: the provider answers planned_state twice, {msgpack: A} then {json: B}. Protobuf
// merges the two embedded messages, so tofu reads msgpack A (msgpack wins over json); the
// middleware reads only the last occurrence's bytes and judges B. A deny rule on the name that
// tofu will plan is not applied at plan time, and the audit records B.
func TestAttackDuplicatePlannedStateMergesDifferently(t *testing.T) {
	rule := mustRule(t, "no-evil", Deny, `planned.name == "evil"`, "")
	m, path := newTestMiddleware(t, rule)
	evil := dynamic(t, nil, planPlannedState, db("evil", nil)) // {planned_state: {msgpack: A}}
	js := []byte(`{"name":"benign","tags":{},"password":null}`)
	benignDV := protowire.AppendBytes(protowire.AppendTag(nil, dynamicJSON, protowire.BytesType), js)
	resp := protowire.AppendBytes(protowire.AppendTag(evil, planPlannedState, protowire.BytesType), benignDV)
	next := func(context.Context, []byte) ([]byte, error) { return resp, nil }
	req := dynamic(t, typeName("acme_database"), planPriorState, cty.NullVal(dbType))
	out, err := m.Unary(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/PlanResourceChange", Protocol: 6, Request: req}, next)
	if err != nil {
		t.Fatal(err)
	}
	if d := diagnostics(out, 4); len(d) == 0 {
		data, _ := os.ReadFile(path)
		t.Errorf("tofu plans name \"evil\" (protobuf merges the two planned_state messages; msgpack wins), but the deny rule judged the last occurrence only and let it through; audit:\n%s", data)
	}
}

// Tried (expected to hold): the audit redacts a sensitive attribute inside a nested attribute type
// of set and map nesting, and inside a nested block of set nesting, in a data source's
// configuration.
func TestAttackAuditNestedTypeSecrets(t *testing.T) {
	str := []byte(`"string"`)
	inner := map[string]*plugin.Attribute{"k": {Type: str, Optional: true}, "secret": {Type: str, Optional: true, Sensitive: true}}
	blk := &plugin.Block{Attributes: map[string]*plugin.Attribute{
		"sset": {Optional: true, NestedType: &plugin.NestedType{NestingMode: "set", Attributes: inner}},
		"smap": {Optional: true, NestedType: &plugin.NestedType{NestingMode: "map", Attributes: inner}},
	}, BlockTypes: map[string]*plugin.NestedBlock{"bset": {NestingMode: "set", Block: &plugin.Block{Attributes: inner}}}}
	path := t.TempDir() + "/audit.jsonl"
	a, err := OpenAudit(path, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m, err := New(Config{Provider: "example.com/x/x", Schema: &plugin.ProviderSchema{DataSourceSchemas: map[string]*plugin.Schema{"x_data": {Block: blk}}}, Audit: a})
	if err != nil {
		t.Fatal(err)
	}
	ty, _ := blk.ImpliedType()
	obj := func(s string) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"k": cty.StringVal("a"), "secret": cty.StringVal("S3CRET-" + s)})
	}
	v := cty.ObjectVal(map[string]cty.Value{"sset": cty.SetVal([]cty.Value{obj("in-set")}),
		"smap": cty.MapVal(map[string]cty.Value{"password": obj("in-map")}), "bset": cty.SetVal([]cty.Value{obj("in-block-set")})})
	mp, err := ctymsgpackMarshal(v, ty)
	if err != nil {
		t.Fatal(err)
	}
	dv := protowire.AppendBytes(protowire.AppendTag(nil, dynamicMsgpack, protowire.BytesType), mp)
	req := protowire.AppendBytes(protowire.AppendTag(typeName("x_data"), readDataConfig, protowire.BytesType), dv)
	next := func(context.Context, []byte) ([]byte, error) { return nil, nil }
	if _, err := m.Unary(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/ReadDataSource", Protocol: 6, Request: req}, next); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "S3CRET") || !strings.Contains(string(data), "smap") {
		t.Errorf("audit:\n%s", data)
	}
}

var ctymsgpackMarshal = ctymsgpack.Marshal

// A provider that echoes a sensitive value it was sent in a diagnostic does not put it in the
// audit: the request's secrets (by the schema) are taken out of the diagnostics' text.
func TestEchoedSecretStaysOutOfTheAudit(t *testing.T) {
	m, path := newTestMiddleware(t)
	diag := protowire.AppendVarint(protowire.AppendTag(nil, diagSeverity, protowire.VarintType), 1)
	diag = protowire.AppendString(protowire.AppendTag(diag, diagSummary, protowire.BytesType), "the password hunter2-secret is too weak")
	resp := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), diag) // ValidateResourceConfig.Response.diagnostics
	next := func(context.Context, []byte) ([]byte, error) { return resp, nil }
	req := dynamic(t, typeName("acme_database"), 2, db("main", nil)) // its config
	if _, err := m.Unary(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/ValidateResourceConfig", Protocol: 6, Request: req}, next); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "hunter2") || !strings.Contains(string(data), "is too weak") {
		t.Errorf("the audit of an echoed secret:\n%s", data)
	}
}
