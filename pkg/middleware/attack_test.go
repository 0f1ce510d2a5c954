package middleware

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
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
