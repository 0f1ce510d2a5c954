package middleware

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// dbSchema is a provider with one resource: acme_database {name, tags, password (sensitive)}.
var dbSchema = &plugin.ProviderSchema{ResourceSchemas: map[string]*plugin.Schema{"acme_database": {Block: &plugin.Block{Attributes: map[string]*plugin.Attribute{
	"name":     {Type: []byte(`"string"`), Required: true},
	"tags":     {Type: []byte(`["map","string"]`), Optional: true},
	"password": {Type: []byte(`"string"`), Optional: true, Sensitive: true},
}}}}}

var dbType = cty.Object(map[string]cty.Type{"name": cty.String, "tags": cty.Map(cty.String), "password": cty.String})

func db(name string, tags map[string]string) cty.Value {
	if name == "" {
		return cty.NullVal(dbType)
	}
	tv := cty.MapValEmpty(cty.String)
	if len(tags) > 0 {
		m := map[string]cty.Value{}
		for k, v := range tags {
			m[k] = cty.StringVal(v)
		}
		tv = cty.MapVal(m)
	}
	return cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(name), "tags": tv, "password": cty.StringVal("hunter2-secret")})
}

// dynamic encodes a value as a DynamicValue message in field num.
func dynamic(t testing.TB, msg []byte, num protowire.Number, v cty.Value) []byte {
	t.Helper()
	mp, err := ctymsgpack.Marshal(v, dbType)
	if err != nil {
		t.Fatal(err)
	}
	dv := protowire.AppendBytes(protowire.AppendTag(nil, dynamicMsgpack, protowire.BytesType), mp)
	return protowire.AppendBytes(protowire.AppendTag(msg, num, protowire.BytesType), dv)
}

func typeName(name string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), name)
}

func newTestMiddleware(t *testing.T, rules ...*Rule) (plugin.Middleware, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	m, err := New(Config{Provider: "example.com/acme/db", Version: "1.0.0", Schema: dbSchema, Audit: a, Rules: rules, Warn: func(s string) { t.Error(s) }})
	if err != nil {
		t.Fatal(err)
	}
	return m, path
}

func mustRule(t testing.TB, name, effect, expr, msg string) *Rule {
	t.Helper()
	r, err := NewRule(name, effect, expr, msg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readAudit(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// A deny rule fails the plan with the rule's name and message and, on apply, answers itself so
// the provider is never asked; the audit records both, with the password redacted.
func TestDenyDeleteOfDatabase(t *testing.T) {
	rule := mustRule(t, "keep-databases", Deny, `resource.type == "acme_database" && action == "delete"`, "databases are deleted by hand")
	m, path := newTestMiddleware(t, rule)
	ctx := context.Background()
	called := 0
	next := func(_ context.Context, req []byte) ([]byte, error) {
		called++
		return dynamic(t, nil, planPlannedState, cty.NullVal(dbType)), nil
	}
	planReq := dynamic(t, typeName("acme_database"), planPriorState, db("main", nil))
	resp, err := m.Unary(ctx, &plugin.Call{Method: "/tfplugin6.Provider/PlanResourceChange", Protocol: 6, Request: planReq}, next)
	if err != nil {
		t.Fatal(err)
	}
	d := diagnostics(resp, 4)
	if len(d) != 1 || d[0].Severity != "error" || !strings.Contains(d[0].Summary, `"keep-databases" denies delete of acme_database`) {
		t.Fatalf("plan diagnostics %+v", d)
	}
	if called != 1 || plugin.WireField(resp, planPlannedState) == nil {
		t.Errorf("the provider's own plan was lost (called %d)", called)
	}
	applyReq := dynamic(t, dynamic(t, typeName("acme_database"), applyPriorState, db("main", nil)), applyPlannedState, cty.NullVal(dbType))
	resp, err = m.Unary(ctx, &plugin.Call{Method: "/tfplugin6.Provider/ApplyResourceChange", Protocol: 6, Request: applyReq}, next)
	if err != nil {
		t.Fatal(err)
	}
	if called != 1 {
		t.Errorf("ApplyResourceChange reached the provider despite the deny rule")
	}
	if string(plugin.WireField(resp, applyNewState)) != string(plugin.WireField(applyReq, applyPriorState)) || len(diagnostics(resp, 3)) != 1 {
		t.Errorf("denied apply must keep the prior state and say why")
	}
	recs := readAudit(t, path)
	if len(recs) != 2 || recs[0].Action != "delete" || recs[1].RPC != "ApplyResourceChange" || len(recs[1].Policy) != 1 {
		t.Fatalf("audit %+v", recs)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "hunter2") || !strings.Contains(string(data), redacted) {
		t.Errorf("the sensitive password was not redacted:\n%s", data)
	}
}

// A warn rule adds a warning and lets the change through; actions are derived from the values.
func TestWarnAndActions(t *testing.T) {
	rule := mustRule(t, "owner-tag", Warn, `action in ["create", "update"] && !("owner" in planned.tags)`, "tag every database with its owner")
	m, path := newTestMiddleware(t, rule)
	cases := []struct {
		prior, planned cty.Value
		replace        bool
		action         string
		warned         bool
	}{
		{db("", nil), db("a", nil), false, "create", true},
		{db("", nil), db("a", map[string]string{"owner": "me"}), false, "create", false},
		{db("a", nil), db("a", nil), false, "no-op", false},
		{db("a", nil), db("a", map[string]string{"x": "y"}), false, "update", true},
		{db("a", nil), db("b", nil), true, "replace", false},
	}
	for _, tc := range cases {
		next := func(context.Context, []byte) ([]byte, error) {
			resp := dynamic(t, nil, planPlannedState, tc.planned)
			if tc.replace {
				resp = protowire.AppendBytes(protowire.AppendTag(resp, planRequiresReplace, protowire.BytesType), []byte{})
			}
			return resp, nil
		}
		req := dynamic(t, typeName("acme_database"), planPriorState, tc.prior)
		resp, err := m.Unary(context.Background(), &plugin.Call{Method: "/tfplugin5.Provider/PlanResourceChange", Protocol: 5, Request: req}, next)
		if err != nil {
			t.Fatal(err)
		}
		if d := diagnostics(resp, 4); (len(d) == 1 && d[0].Severity == "warning") != tc.warned {
			t.Errorf("%s: diagnostics %+v, want warned=%v", tc.action, d, tc.warned)
		}
	}
	for i, r := range readAudit(t, path) {
		if r.Action != cases[i].action {
			t.Errorf("case %d: action %q, want %q", i, r.Action, cases[i].action)
		}
	}
}

// Rules that do not compile, or are not booleans, are refused with CEL's own message.
func TestBadRules(t *testing.T) {
	for expr, want := range map[string]string{
		`action ==`:           "Syntax error",
		`action == 1`:         "no matching overload",
		`resource.type + "x"`: "not a boolean",
		`nosuchvar == "x"`:    "undeclared reference",
	} {
		if _, err := NewRule("r", Deny, expr, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", expr, err, want)
		}
	}
	if _, err := NewRule("r", "block", "true", ""); err == nil || !strings.Contains(err.Error(), `want "deny" or "warn"`) {
		t.Errorf("bad effect: %v", err)
	}
}

// BenchmarkPlanCall is the middleware's own work on one PlanResourceChange: decode, three rules,
// one audit line.
func BenchmarkPlanCall(b *testing.B) {

	rules := []*Rule{
		mustRule(b, "a", Deny, `resource.type == "acme_database" && action == "delete"`, ""),
		mustRule(b, "b", Warn, `action in ["create", "update"] && !("owner" in planned.tags)`, ""),
		mustRule(b, "c", Warn, `action == "replace"`, ""),
	}
	a, err := OpenAudit(filepath.Join(b.TempDir(), "audit.jsonl"), false, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	m, _ := New(Config{Provider: "example.com/acme/db", Schema: dbSchema, Audit: a, Rules: rules})
	req := dynamic(b, typeName("acme_database"), planPriorState, db("", nil))
	resp := dynamic(b, nil, planPlannedState, db("a", map[string]string{"owner": "me"}))
	next := func(context.Context, []byte) ([]byte, error) { return resp, nil }
	call := &plugin.Call{Method: "/tfplugin6.Provider/PlanResourceChange", Protocol: 6, Request: req}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Unary(context.Background(), call, next); err != nil {
			b.Fatal(err)
		}
	}
}

// The README's worked rules compile and decide as the README says.
func TestREADMERules(t *testing.T) {
	owner := mustRule(t, "owner-tag", Deny, `action in ['create', 'update'] && 'tags' in planned && (planned.tags == null || !('owner' in planned.tags))`, "")
	keep := mustRule(t, "keep-databases", Deny, `resource.type == 'acme_database' && action == 'delete'`, "")
	replace := mustRule(t, "replace", Warn, `action == 'replace'`, "")
	cases := []struct {
		rule *Rule
		c    Change
		want bool
	}{
		{owner, Change{Type: "acme_vm", Action: "create", Planned: map[string]any{"tags": map[string]any{"owner": "me"}}}, false},
		{owner, Change{Type: "acme_vm", Action: "create", Planned: map[string]any{"tags": map[string]any{"x": "y"}}}, true},
		{owner, Change{Type: "acme_vm", Action: "update", Planned: map[string]any{"tags": nil}}, true},
		{owner, Change{Type: "acme_dns", Action: "create", Planned: map[string]any{"name": "a"}}, false},
		{keep, Change{Type: "acme_database", Action: "delete"}, true},
		{keep, Change{Type: "acme_database", Action: "update"}, false},
		{replace, Change{Action: "replace"}, true},
	}
	for i, tc := range cases {
		got, err := tc.rule.Matches(tc.c)
		if err != nil || got != tc.want {
			t.Errorf("case %d (%s): %v, %v; want %v", i, tc.rule.Name, got, err, tc.want)
		}
	}
}
