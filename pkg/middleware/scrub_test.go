package middleware

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/pkg/plugin"
)

// A parser quotes what it could not read, often a tail of the value: a quoted part of a secret
// goes as the secret does, and the rule's name and the error's kind stay.
func TestScrubQuotedTailOfASecret(t *testing.T) {
	set := map[string]bool{}
	secretsOf(map[string]any{"name": "main", "password": "2030-01-01Xhunter2"}, map[string]any{"name": "main", "password": redacted}, set)
	got := scrub(`parsing time "2030-01-01Xhunter2" as "2006-01-02T15:04:05Z07:00": cannot parse "Xhunter2" as "T"`, secretList(set))
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "cannot parse") || !strings.Contains(got, `"2006-01-02T15:04:05Z07:00"`) {
		t.Errorf("scrubbed: %s", got)
	}
	if set["main"] {
		t.Errorf("a public attribute counted as secret: %v", set)
	}
}

// A function's arguments are wholly secret in the audit, so none of them is quoted by a rule's
// error either.
func TestRuleErrorOnFunctionArgumentIsScrubbed(t *testing.T) {
	ch := Change{Kind: "function", Type: "f", Action: "call", Planned: []any{"hunter2-arg", map[string]any{"k": "deep-hunter2"}}}
	set := map[string]bool{}
	allForms(ch.Planned, set)
	ch.secrets = secretList(set)
	for _, expr := range []string{`timestamp(planned[0]) > timestamp("2030-01-01T00:00:00Z")`, `planned[1].k`, `int(planned[0]) > 1`} {
		r := mustRule(t, "arg-rule", Deny, expr, "")
		_, err := r.Matches(ch)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), `rule "arg-rule"`) {
			t.Errorf("%s: %v", expr, err)
		}
	}
}

// An apply whose planned_state occurs twice is refused before the provider sees it, with no rule
// at all: tofu's planned state is the merge of the occurrences, not the one oprov would judge.
func TestDuplicatePlannedStateAtApplyIsRefused(t *testing.T) {
	m, path := newTestMiddleware(t)
	req := dynamic(t, typeName("acme_database"), applyPriorState, cty.NullVal(dbType))
	req = dynamic(t, req, applyPlannedState, db("evil", nil))
	req = dynamic(t, req, applyPlannedState, db("benign", nil))
	called := false
	next := func(context.Context, []byte) ([]byte, error) { called = true; return nil, nil }
	resp, err := m.Unary(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/ApplyResourceChange", Protocol: 6, Request: req}, next)
	if err != nil {
		t.Fatal(err)
	}
	d := diagnostics(resp, 3)
	if called || len(d) != 1 || !strings.Contains(d[0].Summary, "planned_state") {
		t.Errorf("provider called %v, diagnostics %+v", called, d)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), "planned_state occurs more than once") {
		t.Errorf("audit:\n%s", data)
	}
}
