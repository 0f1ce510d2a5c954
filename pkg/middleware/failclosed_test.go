package middleware

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// nestedSchema is acme_stack {name, setting (list block) {key, value (dynamic)}}: tofu encodes
// the list of blocks as a dynamic value (a tuple, with its type on the wire).
var nestedSchema = &plugin.ProviderSchema{
	ResourceSchemas: map[string]*plugin.Schema{"acme_stack": {Block: &plugin.Block{
		Attributes: map[string]*plugin.Attribute{"name": {Type: []byte(`"string"`), Required: true}},
		BlockTypes: map[string]*plugin.NestedBlock{"setting": {NestingMode: "list", Block: &plugin.Block{Attributes: map[string]*plugin.Attribute{
			"key":   {Type: []byte(`"string"`), Required: true},
			"value": {Type: []byte(`"dynamic"`), Optional: true},
		}}}},
	}}},
	DataSourceSchemas:        map[string]*plugin.Schema{"acme_info": {Block: &plugin.Block{Attributes: map[string]*plugin.Attribute{"input": {Type: []byte(`"string"`)}}}}},
	EphemeralResourceSchemas: map[string]*plugin.Schema{"acme_token": {Block: &plugin.Block{Attributes: map[string]*plugin.Attribute{"scope": {Type: []byte(`"string"`)}}}}},
	Functions:                map[string]*plugin.Function{"shout": {Parameters: []*plugin.Parameter{{Name: "s", Type: []byte(`"string"`)}}, ReturnType: []byte(`"string"`)}},
}

// stack is an acme_stack value as tofu sends it: its setting blocks as a tuple of objects whose
// value attributes have different types.
func stack(name string, values ...cty.Value) cty.Value {
	var blocks []cty.Value
	for i, v := range values {
		blocks = append(blocks, cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(string(rune('a' + i))), "value": v}))
	}
	return cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(name), "setting": cty.TupleVal(blocks)})
}

func dynamicAs(t testing.TB, msg []byte, num protowire.Number, v cty.Value, ty cty.Type) []byte {
	t.Helper()
	mp, err := ctymsgpack.Marshal(v, ty)
	if err != nil {
		t.Fatal(err)
	}
	dv := protowire.AppendBytes(protowire.AppendTag(nil, dynamicMsgpack, protowire.BytesType), mp)
	return protowire.AppendBytes(protowire.AppendTag(msg, num, protowire.BytesType), dv)
}

func stackMiddleware(t *testing.T, audit *Audit, rules ...*Rule) plugin.Middleware {
	t.Helper()
	m, err := New(Config{Provider: "example.com/acme/stack", Schema: nestedSchema, Audit: audit, Rules: rules, Warn: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func call(rpc string, req []byte) *plugin.Call {
	return &plugin.Call{Method: "/tfplugin6.Provider/" + rpc, Protocol: 6, Request: req}
}

// The implied type of a list block holding a dynamic attribute is dynamic, as tofu's.
func TestImpliedTypeDynamicBlocks(t *testing.T) {
	ty, err := nestedSchema.ResourceSchemas["acme_stack"].Block.ImpliedType()
	if err != nil {
		t.Fatal(err)
	}
	if got := ty.AttributeType("setting"); got != cty.DynamicPseudoType {
		t.Errorf("setting: %#v, want cty.DynamicPseudoType", got)
	}
	single := &plugin.Block{BlockTypes: map[string]*plugin.NestedBlock{"s": {NestingMode: "single", Block: nestedSchema.ResourceSchemas["acme_stack"].Block.BlockTypes["setting"].Block}}}
	if ty, _ := single.ImpliedType(); !ty.AttributeType("s").IsObjectType() {
		t.Errorf("a single block stays an object: %#v", ty)
	}
}

// A deny rule on a value inside a nested block with a dynamic attribute stops the plan: the value
// decodes, and the rule sees it.
func TestDenyInsideDynamicBlock(t *testing.T) {
	rule := mustRule(t, "no-prod", Deny, `planned != null && planned.setting.exists(s, s.value == 'prod-db')`, "no prod here")
	m := stackMiddleware(t, nil, rule)
	ty := cty.Object(map[string]cty.Type{"name": cty.String, "setting": cty.DynamicPseudoType})
	for _, tc := range []struct {
		planned cty.Value
		denied  bool
	}{
		{stack("x", cty.StringVal("prod-db"), cty.NumberIntVal(3)), true},
		{stack("x", cty.StringVal("dev-db"), cty.True), false},
	} {
		next := func(context.Context, []byte) ([]byte, error) {
			return dynamicAs(t, nil, planPlannedState, tc.planned, ty), nil
		}
		req := dynamicAs(t, typeName("acme_stack"), planPriorState, cty.NullVal(ty), ty)
		resp, err := m.Unary(context.Background(), call("PlanResourceChange", req), next)
		if err != nil {
			t.Fatal(err)
		}
		d := diagnostics(resp, 4)
		if got := len(d) == 1 && d[0].Severity == "error" && strings.Contains(d[0].Summary, `"no-prod" denies create of acme_stack`); got != tc.denied {
			t.Errorf("%#v: diagnostics %+v, want denied=%v", tc.planned, d, tc.denied)
		}
	}
}

// A deny rule that cannot be evaluated (a missing key, values that do not decode) denies, naming
// the rule and the error; a warn rule that errors warns.
func TestRuleErrorsFailClosed(t *testing.T) {
	deny := mustRule(t, "needs-owner", Deny, `planned.owner == 'nobody'`, "")
	warn := mustRule(t, "watch", Warn, `planned.owner == 'nobody'`, "")
	byType := mustRule(t, "other-type", Deny, `resource.type == 'acme_other' && planned.name == 'x'`, "")
	m := stackMiddleware(t, nil, deny, warn, byType)
	ty := cty.Object(map[string]cty.Type{"name": cty.String, "setting": cty.DynamicPseudoType})
	next := func(context.Context, []byte) ([]byte, error) {
		return dynamicAs(t, nil, planPlannedState, stack("x", cty.StringVal("a")), ty), nil
	}
	req := dynamicAs(t, typeName("acme_stack"), planPriorState, cty.NullVal(ty), ty)
	resp, err := m.Unary(context.Background(), call("PlanResourceChange", req), next)
	if err != nil {
		t.Fatal(err)
	}
	d := diagnostics(resp, 4)
	if len(d) != 2 || d[0].Severity != "error" || !strings.Contains(d[0].Summary, `"needs-owner" cannot be evaluated on create of acme_stack, so it denies it`) ||
		d[1].Severity != "warning" || !strings.Contains(d[1].Summary, `"watch" cannot be evaluated`) {
		t.Fatalf("diagnostics %+v", d)
	}
	if detail := string(plugin.WireField(plugin.WireFields(resp, 4)[0], diagDetail)); !strings.Contains(detail, "no such key") {
		t.Errorf("the detail does not give CEL's error: %q", detail)
	}

	// Values that do not decode: garbage where the planned state belongs.
	bad := func(context.Context, []byte) ([]byte, error) {
		dv := protowire.AppendBytes(protowire.AppendTag(nil, dynamicMsgpack, protowire.BytesType), []byte{0x92, 0x01})
		return protowire.AppendBytes(protowire.AppendTag(nil, planPlannedState, protowire.BytesType), dv), nil
	}
	resp, err = m.Unary(context.Background(), call("PlanResourceChange", req), bad)
	if err != nil {
		t.Fatal(err)
	}
	d = diagnostics(resp, 4)
	if len(d) != 2 || d[0].Severity != "error" {
		t.Fatalf("undecodable values: diagnostics %+v", d)
	}
	if detail := string(plugin.WireField(plugin.WireFields(resp, 4)[0], diagDetail)); !strings.Contains(detail, "did not decode") {
		t.Errorf("the detail does not say the values did not decode: %q", detail)
	}
}

// Every call that can change something is judged, with its own action, and denied without
// reaching the provider (import and move: without their result reaching tofu).
func TestEveryCallJudged(t *testing.T) {
	ty := cty.Object(map[string]cty.Type{"name": cty.String, "setting": cty.DynamicPseudoType})
	str := func(n protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, n, protowire.BytesType), s)
	}
	msg := func(n protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), b)
	}
	imported := msg(1, dynamicAs(t, str(1, "acme_stack"), 2, stack("imp"), ty))
	cases := []struct {
		rpc, action string
		req, resp   []byte
		rule        string
		forwarded   bool // reaches the provider even when denied (judged on its result)
	}{
		{"ImportResourceState", "import", append(str(1, "acme_stack"), str(2, "id-1")...), imported, `planned.name == 'imp'`, true},
		{"MoveResourceState", "move", append(append(str(2, "acme_old"), msg(4, str(1, `{"a":1}`))...), str(5, "acme_stack")...),
			dynamicAs(t, nil, 1, stack("moved"), ty), `resource.source_type == 'acme_old' && prior.a == 1 && planned.name == 'moved'`, true},
		{"ReadDataSource", "read", dynamicAs(t, str(1, "acme_info"), 2, cty.ObjectVal(map[string]cty.Value{"input": cty.StringVal("q")}), cty.Object(map[string]cty.Type{"input": cty.String})), nil,
			`resource.kind == 'data_source' && planned.input == 'q'`, false},
		{"OpenEphemeralResource", "open", dynamicAs(t, str(1, "acme_token"), 2, cty.ObjectVal(map[string]cty.Value{"scope": cty.StringVal("all")}), cty.Object(map[string]cty.Type{"scope": cty.String})), nil,
			`planned.scope == 'all'`, false},
		{"RenewEphemeralResource", "renew", str(1, "acme_token"), nil, `resource.type == 'acme_token'`, false},
		{"CloseEphemeralResource", "close", str(1, "acme_token"), nil, `resource.type == 'acme_token'`, false},
		{"CallFunction", "call", dynamicAs(t, str(1, "shout"), 2, cty.StringVal("hi"), cty.String), nil, `resource.kind == 'function' && planned[0] == 'hi'`, false},
		{"PlanAction", "plan-action", str(1, "acme_reboot"), nil, `resource.type == 'acme_reboot'`, false},
		{"DeleteState", "delete-state", str(1, "acme_store"), nil, `resource.kind == 'state_store'`, false},
	}
	for _, tc := range cases {
		t.Run(tc.rpc, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			a, err := OpenAudit(path, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			m := stackMiddleware(t, a, mustRule(t, "stop", Deny, "action == '"+tc.action+"' && "+tc.rule, "stopped"))
			served := 0
			next := func(context.Context, []byte) ([]byte, error) { served++; return tc.resp, nil }
			resp, err := m.Unary(context.Background(), call(tc.rpc, tc.req), next)
			if err != nil {
				t.Fatal(err)
			}
			if (served == 1) != tc.forwarded {
				t.Errorf("served %d times", served)
			}
			denied := false
			if tc.rpc == "CallFunction" {
				denied = strings.Contains(string(plugin.WireField(plugin.WireField(resp, callFunctionError), 1)), `"stop" denies call of shout`)
			} else {
				d := diagnostics(resp, diagOf(tc.rpc))
				denied = len(d) == 1 && d[0].Severity == "error" && strings.Contains(d[0].Summary, `"stop" denies `+tc.action)
			}
			if !denied {
				t.Errorf("not denied: response %x", resp)
			}
			if tc.forwarded && len(plugin.WireFields(resp, 1)) > 0 {
				t.Errorf("a denied %s still hands tofu its result", tc.rpc)
			}
			recs := readAudit(t, path)
			if len(recs) != 1 || recs[0].Action != tc.action || len(recs[0].Policy) != 1 {
				t.Errorf("audit %+v", recs)
			}
		})
	}
}

// A deny at apply answers with the prior state, private data and identity the plan saw.
func TestDenyAtApplyKeepsPrivate(t *testing.T) {
	m := stackMiddleware(t, nil, mustRule(t, "late", Deny, `action == 'update' && planned.name == 'b'`, ""))
	ty := cty.Object(map[string]cty.Type{"name": cty.String, "setting": cty.DynamicPseudoType})
	prior := dynamicAs(t, nil, 2, stack("a"), ty)
	priorDV := plugin.WireField(prior, 2)
	identity := []byte("\x0a\x03id1")
	planReq := append(append(append(typeName("acme_stack"), prior...), protowire.AppendBytes(protowire.AppendTag(nil, planPriorPrivate, protowire.BytesType), []byte("secret-private"))...),
		protowire.AppendBytes(protowire.AppendTag(nil, planPriorIdentity, protowire.BytesType), identity)...)
	// The plan itself passes (name "a" -> "a"); the rule is met only at apply, as when a value
	// unknown at plan becomes known.
	planned := func(context.Context, []byte) ([]byte, error) {
		return dynamicAs(t, nil, planPlannedState, stack("a"), ty), nil
	}
	if _, err := m.Unary(context.Background(), call("PlanResourceChange", planReq), planned); err != nil {
		t.Fatal(err)
	}
	applyReq := append(append(typeName("acme_stack"), prior...), dynamicAs(t, nil, applyPlannedState, stack("b"), ty)...)
	applyReq = protowire.AppendBytes(protowire.AppendTag(applyReq, applyPlannedPrivate, protowire.BytesType), []byte("changed-by-plan"))
	resp, err := m.Unary(context.Background(), call("ApplyResourceChange", applyReq), func(context.Context, []byte) ([]byte, error) {
		t.Fatal("the provider was asked to apply")
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(plugin.WireField(resp, applyNewState)) != string(priorDV) || string(plugin.WireField(resp, applyNewPrivate)) != "secret-private" || string(plugin.WireField(resp, applyNewIdentity)) != string(identity) {
		t.Errorf("denied apply: state %x private %q identity %x", plugin.WireField(resp, applyNewState), plugin.WireField(resp, applyNewPrivate), plugin.WireField(resp, applyNewIdentity))
	}
}

// No record is dropped: a number JSON cannot hold is written as a marked string.
func TestAuditUnencodableNumber(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	schema := &plugin.ProviderSchema{ResourceSchemas: map[string]*plugin.Schema{"acme_n": {Block: &plugin.Block{Attributes: map[string]*plugin.Attribute{"n": {Type: []byte(`"number"`)}}}}}}
	m, err := New(Config{Provider: "p", Schema: schema, Audit: a})
	if err != nil {
		t.Fatal(err)
	}
	ty := cty.Object(map[string]cty.Type{"n": cty.Number})
	huge, _ := cty.ParseNumberVal("1e400")
	next := func(context.Context, []byte) ([]byte, error) {
		return dynamicAs(t, nil, planPlannedState, cty.ObjectVal(map[string]cty.Value{"n": huge}), ty), nil
	}
	req := dynamicAs(t, typeName("acme_n"), planPriorState, cty.NullVal(ty), ty)
	if _, err := m.Unary(context.Background(), call("PlanResourceChange", req), next); err != nil {
		t.Fatal(err)
	}
	recs := readAudit(t, path)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	if got := recs[0].Planned.(map[string]any)["n"]; got != unencodable+"1e+400" {
		t.Errorf("planned n = %#v", got)
	}
}

// An audit that cannot be written fails the call, and every later one before it reaches the
// provider; with Continue, calls go on and a warning says records are lost.
func TestAuditWriteFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	for _, cont := range []bool{false, true} {
		a, err := OpenAudit("/dev/full", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var warned []string
		a.Continue, a.Warn = cont, func(s string) { warned = append(warned, s) }
		m, _ := New(Config{Provider: "p", Audit: a, Warn: a.Warn})
		served := 0
		next := func(context.Context, []byte) ([]byte, error) { served++; return nil, nil }
		// A refused call answers with an error diagnostic where its response has them.
		callErr := func(rpc string, req []byte) error {
			resp, err := m.Unary(context.Background(), call(rpc, req), next)
			if d := diagnostics(resp, diagOf(rpc)); err == nil && len(d) == 1 && d[0].Severity == "error" {
				return errors.New(string(plugin.WireField(plugin.WireFields(resp, diagOf(rpc))[0], diagDetail)))
			}
			return err
		}
		err1 := callErr("GetProviderSchema", nil)
		err2 := callErr("ApplyResourceChange", typeName("x"))
		a.Close()
		if cont {
			if err1 != nil || err2 != nil || served != 2 || len(warned) != 1 {
				t.Errorf("continue: errors %v %v, served %d, warnings %q", err1, err2, served, warned)
			}
			continue
		}
		if err1 == nil || !strings.Contains(err1.Error(), "audit trail cannot be written") || err2 == nil || served != 1 || len(warned) != 1 {
			t.Errorf("fail: errors %v / %v, served %d (the apply must never reach the provider)", err1, err2, served)
		}
	}
}

// A call the middleware does not know passes through and is audited as unknown.
func TestUnknownCallAudited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, _ := OpenAudit(path, false, nil)
	defer a.Close()
	m, _ := New(Config{Provider: "p", Audit: a, Rules: []*Rule{mustRule(t, "all", Deny, "true", "")}})
	resp, err := m.Unary(context.Background(), call("FutureCall", []byte("req")), func(_ context.Context, b []byte) ([]byte, error) { return b, nil })
	if err != nil || string(resp) != "req" {
		t.Fatalf("%q %v", resp, err)
	}
	m.Done("/tfplugin6.Provider/FutureStream", 0, nil)
	recs := readAudit(t, path)
	if len(recs) != 2 || recs[0].Action != "unknown" || recs[1].Action != "unknown" {
		t.Errorf("audit %+v", recs)
	}
}

// Streams with a gate: a deny on InvokeAction ends it before the provider sees it.
func TestGateInvokeAction(t *testing.T) {
	m := stackMiddleware(t, nil, mustRule(t, "no-reboot", Deny, `action == 'invoke' && resource.type == 'acme_reboot'`, ""))
	g := m.(plugin.Gate)
	req := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "acme_reboot")
	if err := g.Gate(context.Background(), call("InvokeAction", req)); err == nil || !strings.Contains(err.Error(), "no-reboot") {
		t.Errorf("gate: %v", err)
	}
	other := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "acme_ping")
	if err := g.Gate(context.Background(), call("InvokeAction", other)); err != nil {
		t.Errorf("gate on another action: %v", err)
	}
}

// A value unknown at plan reads as unknown: a rule on it does not match then, and the same
// change with the value known (tofu's plan at apply time) is denied.
func TestUnknownAtPlanJudgedAgain(t *testing.T) {
	m := stackMiddleware(t, nil, mustRule(t, "no-prod", Deny, `planned != null && planned.name == 'prod-db'`, ""))
	ty := cty.Object(map[string]cty.Type{"name": cty.String, "setting": cty.DynamicPseudoType})
	req := dynamicAs(t, typeName("acme_stack"), planPriorState, cty.NullVal(ty), ty)
	for _, tc := range []struct {
		name   cty.Value
		denied bool
	}{{cty.UnknownVal(cty.String), false}, {cty.StringVal("prod-db"), true}} {
		planned := cty.ObjectVal(map[string]cty.Value{"name": tc.name, "setting": cty.EmptyTupleVal})
		next := func(context.Context, []byte) ([]byte, error) {
			return dynamicAs(t, nil, planPlannedState, planned, ty), nil
		}
		resp, err := m.Unary(context.Background(), call("PlanResourceChange", req), next)
		if err != nil {
			t.Fatal(err)
		}
		if d := diagnostics(resp, 4); (len(d) == 1 && d[0].Severity == "error") != tc.denied {
			t.Errorf("name %#v: diagnostics %+v, want denied=%v", tc.name, d, tc.denied)
		}
	}
}
