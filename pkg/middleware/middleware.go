package middleware

import (
	"context"
	"fmt"
	"time"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// Config is what one provider's middleware does.
type Config struct {
	Provider string // address
	Version  string
	Schema   *plugin.ProviderSchema // to decode values; nil decodes none
	Audit    *Audit                 // nil: no audit trail
	Rules    []*Rule
	// Warn hears about problems the middleware itself meets (an audit write that failed, a rule
	// that could not be evaluated); they never fail the call.
	Warn func(string)
}

// resourceSchema is a resource type's block and the type its values have.
type resourceSchema struct {
	block *plugin.Block
	ty    cty.Type
}

type middleware struct {
	cfg       Config
	resources map[string]resourceSchema
}

// New makes the middleware for one provider.
func New(cfg Config) (plugin.Middleware, error) {
	m := &middleware{cfg: cfg, resources: map[string]resourceSchema{}}
	if cfg.Warn == nil {
		m.cfg.Warn = func(string) {}
	}
	if cfg.Schema != nil {
		for name, s := range cfg.Schema.ResourceSchemas {
			ty, err := impliedType(s.Block)
			if err != nil {
				return nil, fmt.Errorf("%s: resource %s's schema: %w", cfg.Provider, name, err)
			}
			m.resources[name] = resourceSchema{block: s.Block, ty: ty}
		}
	}
	return m, nil
}

// Unary handles one call: resource changes are checked against the rules, and every call is
// recorded.
func (m *middleware) Unary(ctx context.Context, call *plugin.Call, next plugin.Next) ([]byte, error) {
	start := time.Now()
	rec := &Record{Provider: m.cfg.Provider, Version: m.cfg.Version, RPC: call.RPC()}
	info := rpcs[rec.RPC]
	if info.nameField != 0 {
		rec.Kind, rec.Name = info.kind, string(field(call.Request, info.nameField))
	}
	var resp []byte
	var err error
	switch rec.RPC {
	case "PlanResourceChange":
		resp, err = m.plan(ctx, call, next, rec)
	case "ApplyResourceChange":
		resp, err = m.apply(ctx, call, next, rec)
	default:
		resp, err = next(ctx, call.Request)
	}
	if err == nil {
		m.noteResult(rec, info, resp)
	}
	m.record(rec, start, err)
	return resp, err
}

// Done records a call that passed through unseen (a stream, or a method the middleware has no
// table entry for).
func (m *middleware) Done(method string, took time.Duration, err error) {
	c := &plugin.Call{Method: method}
	m.record(&Record{Provider: m.cfg.Provider, Version: m.cfg.Version, RPC: c.RPC()}, time.Now().Add(-took), err)
}

// Own records a call oprov itself made to the provider.
func (m *middleware) Own(method string, took time.Duration, err error) {
	c := &plugin.Call{Method: method}
	m.record(&Record{Provider: m.cfg.Provider, Version: m.cfg.Version, RPC: c.RPC(), Caller: "oprov"}, time.Now().Add(-took), err)
}

// noteResult records what a response says went wrong.
func (m *middleware) noteResult(rec *Record, info rpcInfo, resp []byte) {
	if info.diagField != 0 {
		rec.Diagnostics = append(rec.Diagnostics, diagnostics(resp, info.diagField)...)
	}
	if rec.RPC == "CallFunction" {
		if fe := field(resp, callFunctionError); fe != nil {
			rec.Diagnostics = append(rec.Diagnostics, Diagnostic{Severity: "error", Summary: string(field(fe, 1))})
		}
	}
	if rec.RPC == "ReadResource" || rec.RPC == "ReadDataSource" {
		rec.Action = "read"
	}
}

func (m *middleware) record(rec *Record, start time.Time, err error) {
	if m.cfg.Audit == nil {
		return
	}
	rec.Time = start.UTC().Format(time.RFC3339Nano)
	rec.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		rec.Error = err.Error()
	}
	if !m.cfg.Audit.Values {
		rec.Prior, rec.Planned = nil, nil
	}
	if werr := m.cfg.Audit.Write(rec); werr != nil {
		m.cfg.Warn(fmt.Sprintf("audit: %v", werr))
	}
}

// plan forwards a plan, then judges the planned change: a deny rule adds an error diagnostic, so
// the plan fails before anything is applied; a warn rule adds a warning.
func (m *middleware) plan(ctx context.Context, call *plugin.Call, next plugin.Next, rec *Record) ([]byte, error) {
	resp, err := next(ctx, call.Request)
	if err != nil {
		return nil, err
	}
	replace := len(fields(resp, planRequiresReplace)) > 0
	ch := m.change(rec, field(call.Request, planPriorState), field(resp, planPlannedState), replace)
	for _, d := range m.judge(ch, rec) {
		resp = appendDiagnostic(resp, rpcs["PlanResourceChange"].diagField, d.severity, d.summary, d.detail)
	}
	return resp, nil
}

// apply judges the change again before it is made: a deny rule answers with an error and the
// prior state, and the provider is never asked to apply it.
func (m *middleware) apply(ctx context.Context, call *plugin.Call, next plugin.Next, rec *Record) ([]byte, error) {
	prior := field(call.Request, applyPriorState)
	ch := m.change(rec, prior, field(call.Request, applyPlannedState), false)
	var denied []byte
	for _, d := range m.judge(ch, rec) {
		if d.severity == severityError {
			denied = appendDiagnostic(denied, rpcs["ApplyResourceChange"].diagField, d.severity, d.summary, d.detail)
		}
	}
	if denied != nil {
		resp := protowire.AppendBytes(protowire.AppendTag(nil, applyNewState, protowire.BytesType), prior)
		return append(resp, denied...), nil
	}
	return next(ctx, call.Request)
}

// change decodes a resource change and derives its action: create, update, replace, delete or
// no-op.
func (m *middleware) change(rec *Record, priorDV, plannedDV []byte, replace bool) Change {
	ch := Change{Type: rec.Name, Provider: m.cfg.Provider}
	rs, ok := m.resources[rec.Name]
	prior, plannedV := cty.DynamicVal, cty.DynamicVal
	if ok {
		var err1, err2 error
		prior, err1 = decodeDynamic(priorDV, rs.ty)
		plannedV, err2 = decodeDynamic(plannedDV, rs.ty)
		if err1 != nil || err2 != nil {
			m.cfg.Warn(fmt.Sprintf("%s: cannot decode %s values (%v %v): rules see no values", m.cfg.Provider, rec.Name, err1, err2))
			ok = false
		}
	}
	if !ok {
		ch.Action = rawAction(priorDV, plannedDV, replace)
		rec.Action = ch.Action
		return ch
	}
	ch.Action = action(prior, plannedV, replace)
	rec.Action = ch.Action
	if len(m.cfg.Rules) > 0 {
		ch.Prior, ch.Planned = goValue(prior, rs.block, false), goValue(plannedV, rs.block, false)
	}
	if m.cfg.Audit != nil && m.cfg.Audit.Values {
		rec.Prior, rec.Planned = goValue(prior, rs.block, true), goValue(plannedV, rs.block, true)
	}
	return ch
}

func action(prior, planned cty.Value, replace bool) string {
	switch {
	case prior.IsNull() && planned.IsNull():
		return "no-op"
	case prior.IsNull():
		return "create"
	case planned.IsNull():
		return "delete"
	case replace:
		return "replace"
	case prior.Equals(planned).True() && planned.IsWhollyKnown():
		return "no-op"
	}
	return "update"
}

// rawAction derives the action without a schema: msgpack encodes null as the byte 0xc0, and
// tofu's encoder is deterministic, so equal values are equal bytes.
func rawAction(priorDV, plannedDV []byte, replace bool) string {
	isNull := func(dv []byte) bool {
		mp := field(dv, dynamicMsgpack)
		return len(mp) == 0 && len(field(dv, dynamicJSON)) == 0 || len(mp) == 1 && mp[0] == 0xc0
	}
	switch pn, nn := isNull(priorDV), isNull(plannedDV); {
	case pn && nn:
		return "no-op"
	case pn:
		return "create"
	case nn:
		return "delete"
	case replace:
		return "replace"
	case string(field(priorDV, dynamicMsgpack)) == string(field(plannedDV, dynamicMsgpack)):
		return "no-op"
	}
	return "update"
}

type verdict struct {
	severity        uint64
	summary, detail string
}

// judge evaluates every rule on a change; it records what matched.
func (m *middleware) judge(ch Change, rec *Record) []verdict {
	var out []verdict
	for _, r := range m.cfg.Rules {
		hit, err := r.Matches(ch)
		if err != nil {
			m.cfg.Warn(fmt.Sprintf("%s %s: %v", m.cfg.Provider, ch.Type, err))
			continue
		}
		if !hit {
			continue
		}
		rec.Policy = append(rec.Policy, Decision{Rule: r.Name, Effect: r.Effect, Message: r.Message})
		v := verdict{severity: severityWarning, summary: fmt.Sprintf("oprov policy %q warns about %s of %s", r.Name, ch.Action, ch.Type)}
		if r.Effect == Deny {
			v = verdict{severity: severityError, summary: fmt.Sprintf("oprov policy %q denies %s of %s", r.Name, ch.Action, ch.Type)}
		}
		v.detail = r.Message
		out = append(out, v)
	}
	return out
}
