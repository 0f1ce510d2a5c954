package middleware

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/protocol"
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

// schema is a block and the type its values have.
type schema struct {
	block *plugin.Block
	ty    cty.Type
}

type middleware struct {
	cfg         Config
	resources   map[string]schema
	dataSources map[string]schema
	ephemeral   map[string]schema
	functions   map[string]*plugin.Function

	mu    sync.Mutex
	kept  map[string]keptState // by keptKey: what a plan saw, for a deny at apply
	noted map[string]bool      // decode failures already warned about
}

// keptState is an object's private data and identity as the plan saw them, so that a deny at
// apply can hand them back as they were.
type keptState struct{ private, identity []byte }

// New makes the middleware for one provider.
func New(cfg Config) (plugin.Middleware, error) {
	m := &middleware{cfg: cfg, resources: map[string]schema{}, dataSources: map[string]schema{}, ephemeral: map[string]schema{},
		functions: map[string]*plugin.Function{}, kept: map[string]keptState{}, noted: map[string]bool{}}
	if cfg.Warn == nil {
		m.cfg.Warn = func(string) {}
	}
	if s := cfg.Schema; s != nil {
		for _, set := range []struct {
			what string
			from map[string]*plugin.Schema
			to   map[string]schema
		}{{"resource", s.ResourceSchemas, m.resources}, {"data source", s.DataSourceSchemas, m.dataSources}, {"ephemeral resource", s.EphemeralResourceSchemas, m.ephemeral}} {
			for name, sc := range set.from {
				ty, err := sc.Block.ImpliedType()
				if err != nil {
					return nil, fmt.Errorf("%s: %s %s's schema: %w", cfg.Provider, set.what, name, err)
				}
				set.to[name] = schema{block: sc.Block, ty: ty}
			}
		}
		for name, f := range s.Functions {
			m.functions[name] = f
		}
	}
	return m, nil
}

// Actions of the calls that are judged besides plan and apply (whose action comes from the
// change), and of the streams the middleware knows.
var callActions = map[string]string{
	"ImportResourceState": "import", "MoveResourceState": "move", "ReadDataSource": "read",
	"OpenEphemeralResource": "open", "RenewEphemeralResource": "renew", "CloseEphemeralResource": "close",
	"CallFunction": "call", "PlanAction": "plan-action", "InvokeAction": "invoke",
	"DeleteState": "delete-state", "LockState": "lock-state", "UnlockState": "unlock-state", "WriteStateBytes": "write-state",
	"ReadResource": "refresh", "ListResource": "list", "ReadStateBytes": "read-state",
}

// Unary handles one call: every call that can change something is judged by the rules before
// (or, for import and move, on) its result, and every call is recorded.
func (m *middleware) Unary(ctx context.Context, call *plugin.Call, next plugin.Next) ([]byte, error) {
	start := time.Now()
	rec := &Record{Provider: m.cfg.Provider, Version: m.cfg.Version, RPC: call.RPC()}
	info, known := rpcOf(rec.RPC)
	if info.nameField != 0 {
		rec.Kind, rec.Name = info.kind, string(plugin.WireField(call.Request, info.nameField))
	}
	rec.Action = callActions[rec.RPC]
	if !known {
		rec.Action = "unknown"
	}
	if a := m.cfg.Audit; a != nil {
		if err := a.Broken(); err != nil {
			return m.failed(rec.RPC, err)
		}
	}
	var resp []byte
	var err error
	switch rec.RPC {
	case "PlanResourceChange":
		resp, err = m.plan(ctx, call, next, rec)
	case "ApplyResourceChange":
		resp, err = m.apply(ctx, call, next, rec)
	case "ImportResourceState":
		resp, err = m.imported(ctx, call, next, rec)
	case "MoveResourceState":
		resp, err = m.move(ctx, call, next, rec)
	case "ReadDataSource":
		var dup []string
		ch := m.configChange(rec, m.dataSources, only(call.Request, readDataConfig, "config", &dup))
		ch.dup = dup
		resp, err = m.before(ctx, call, next, rec, ch)
	case "OpenEphemeralResource":
		var dup []string
		ch := m.configChange(rec, m.ephemeral, only(call.Request, openEphemeralConfig, "config", &dup))
		ch.dup = dup
		resp, err = m.before(ctx, call, next, rec, ch)
	case "CallFunction":
		resp, err = m.before(ctx, call, next, rec, m.functionChange(rec, plugin.WireFields(call.Request, 2)))
	case "RenewEphemeralResource", "CloseEphemeralResource", "DeleteState", "LockState", "UnlockState":
		resp, err = m.before(ctx, call, next, rec, Change{Kind: rec.Kind, Type: rec.Name, Action: rec.Action, Provider: m.cfg.Provider})
	case "PlanAction":
		resp, err = m.before(ctx, call, next, rec, Change{Kind: rec.Kind, Type: rec.Name, Action: rec.Action, Provider: m.cfg.Provider,
			Err: errors.New("oprov does not decode action configurations")})
	default:
		resp, err = next(ctx, call.Request)
	}
	if err == nil {
		m.noteResult(rec, info, call.Request, resp)
	}
	if werr := m.record(rec, start, err); werr != nil {
		m.cfg.Warn(werr.Error())
		return m.failed(rec.RPC, werr)
	}
	return resp, err
}

// failed is the answer to a call that must fail: an error diagnostic tofu shows as it is, where
// the call's response has diagnostics, otherwise a gRPC error.
func (m *middleware) failed(rpc string, err error) ([]byte, error) {
	if f := diagOf(rpc); f != 0 {
		return appendDiagnostic(nil, f, severityError, "oprov: the call is refused", err.Error()), nil
	}
	return nil, status.Error(codes.Unavailable, err.Error())
}

// Gate judges a stream (InvokeAction, WriteStateBytes) on its first request, before the provider
// sees it: a deny ends the stream with an error.
func (m *middleware) Gate(ctx context.Context, call *plugin.Call) error {
	if a := m.cfg.Audit; a != nil {
		if err := a.Broken(); err != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
	}
	ch := Change{Action: callActions[call.RPC()], Provider: m.cfg.Provider}
	switch call.RPC() {
	case "InvokeAction":
		ch.Kind, ch.Type = "action", string(plugin.WireField(call.Request, invokeActionType))
		ch.Err = errors.New("oprov does not decode action configurations")
	case "WriteStateBytes":
		var dup []string
		ch.Kind, ch.Type = "state_store", string(plugin.WireField(only(call.Request, writeStateMeta, "meta", &dup), chunkMetaType))
		ch.dup = dup
	default:
		return nil
	}
	var denied []string
	for _, v := range m.judge(ch, &Record{}) {
		if v.severity == severityError {
			denied = append(denied, v.summary+": "+v.detail)
		}
	}
	if len(denied) > 0 {
		return status.Error(codes.PermissionDenied, strings.Join(denied, "; "))
	}
	return nil
}

// Done records a call that passed through unseen (a stream, or a method the middleware has no
// table entry for).
func (m *middleware) Done(method string, took time.Duration, err error) {
	c := &plugin.Call{Method: method}
	rec := &Record{Provider: m.cfg.Provider, Version: m.cfg.Version, RPC: c.RPC(), Action: callActions[c.RPC()]}
	if rec.Action == "" {
		rec.Action = "unknown"
	}
	m.record(rec, time.Now().Add(-took), err)
}

// Own records a call oprov itself made to the provider.
func (m *middleware) Own(method string, took time.Duration, err error) {
	c := &plugin.Call{Method: method}
	m.record(&Record{Provider: m.cfg.Provider, Version: m.cfg.Version, RPC: c.RPC(), Caller: "oprov"}, time.Now().Add(-took), err)
}

// noteResult records what a response says went wrong.
func (m *middleware) noteResult(rec *Record, info rpcInfo, req, resp []byte) {
	n := len(rec.Diagnostics)
	if info.diagField != 0 {
		rec.Diagnostics = append(rec.Diagnostics, diagnostics(resp, info.diagField)...)
	}
	if rec.RPC == "CallFunction" {
		if fe := plugin.WireField(resp, callFunctionError); fe != nil {
			rec.Diagnostics = append(rec.Diagnostics, Diagnostic{Severity: "error", Summary: string(plugin.WireField(fe, functionErrorText))})
		}
	}
	if len(rec.Diagnostics) > n && m.cfg.Audit != nil {
		// A provider may echo a secret it was sent; the audit keeps the diagnostics without it.
		secrets := m.requestSecrets(rec, req)
		for i := n; i < len(rec.Diagnostics); i++ {
			rec.Diagnostics[i].Summary = scrub(rec.Diagnostics[i].Summary, secrets)
		}
	}
}

// argumentSecrets adds every argument of a call of function name, decoded by its parameters.
func (m *middleware) argumentSecrets(name string, args [][]byte, set map[string]bool) {
	f, ok := m.functions[name]
	if !ok {
		return
	}
	for i, a := range args {
		p := f.VariadicParameter
		if i < len(f.Parameters) {
			p = f.Parameters[i]
		}
		if p == nil {
			return
		}
		if ty, err := ctyjson.UnmarshalType(p.Type); err == nil {
			if val, err := decodeDynamic(a, ty); err == nil {
				allForms(plainValue(val, false), set)
			}
		}
	}
}

// requestSecrets gives the secret values a call's request holds, by the protocol model's classes:
// what the schema marks in a configuration or state, every value of the provider's
// configuration, and every argument of a function (their secrecy is not known).
func (m *middleware) requestSecrets(rec *Record, req []byte) []string {
	v, method := protocol.Lookup("/tfplugin6.Provider/" + rec.RPC)
	if method == nil {
		if v, method = protocol.Lookup("/tfplugin5.Provider/" + rec.RPC); method == nil {
			return nil
		}
	}
	msg := v.Message(method.Request)
	set := map[string]bool{}
	for i := range msg.Fields {
		f := &msg.Fields[i]
		if f.Type != "DynamicValue" {
			continue
		}
		cls := protocol.ClassWithin(protocol.Container, method.Request, f)
		if cls == protocol.FunctionArgument {
			m.argumentSecrets(rec.Name, plugin.WireFields(req, f.Num), set)
			continue
		}
		for _, dv := range plugin.WireFields(req, f.Num) {
			switch cls.Secrecy() {
			case protocol.BySchema:
				sets := map[string]map[string]schema{"resource": m.resources, "data_source": m.dataSources, "ephemeral_resource": m.ephemeral}[rec.Kind]
				if sc, ok := sets[rec.Name]; ok {
					if val, err := decodeDynamic(dv, sc.ty); err == nil {
						secretsOf(goValue(val, sc.block, false), goValue(val, sc.block, true), set)
					}
				}
			case protocol.AllAttributes:
				if s := m.cfg.Schema; s != nil && s.Provider != nil && s.Provider.Block != nil {
					if ty, err := s.Provider.Block.ImpliedType(); err == nil {
						if val, err := decodeDynamic(dv, ty); err == nil {
							allForms(plainValue(val, false), set)
						}
					}
				}
			}
		}
	}
	return secretList(set)
}

// record writes the call's audit line; an error means the call must fail (see Audit.Put).
func (m *middleware) record(rec *Record, start time.Time, err error) error {
	if m.cfg.Audit == nil {
		return nil
	}
	rec.Time = start.UTC().Format(time.RFC3339Nano)
	rec.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		rec.Error = err.Error()
	}
	if !m.cfg.Audit.Values {
		rec.Prior, rec.Planned = nil, nil
	}
	return m.cfg.Audit.Put(rec)
}

// plan forwards a plan, then judges the planned change: a deny rule adds an error diagnostic, so
// the plan fails before anything is applied; a warn rule adds a warning. It keeps the object's
// private data and identity for a deny at apply.
func (m *middleware) plan(ctx context.Context, call *plugin.Call, next plugin.Next, rec *Record) ([]byte, error) {
	resp, err := next(ctx, call.Request)
	if err != nil {
		return nil, err
	}
	var dup []string
	prior := only(call.Request, planPriorState, "prior_state", &dup)
	m.mu.Lock()
	if len(m.kept) > 10000 {
		clear(m.kept) // a bound, never reached by one run's resources in practice
	}
	m.kept[keptKey(rec.Name, prior)] = keptState{private: plugin.WireField(call.Request, planPriorPrivate), identity: plugin.WireField(call.Request, planPriorIdentity)}
	m.mu.Unlock()
	replace := len(plugin.WireFields(resp, planRequiresReplace)) > 0
	ch := m.change(rec, prior, only(resp, planPlannedState, "planned_state", &dup), replace)
	ch.dup = dup
	for _, d := range m.judge(ch, rec) {
		resp = appendDiagnostic(resp, diagOf("PlanResourceChange"), d.severity, d.summary, d.detail)
	}
	return resp, nil
}

func keptKey(typ string, priorDV []byte) string {
	h := sha256.Sum256(priorDV)
	return typ + "\x00" + string(h[:])
}

// apply judges the change again before it is made: a deny rule answers with an error, the prior
// state, and the private data and identity the object had, and the provider is never asked to
// apply it.
func (m *middleware) apply(ctx context.Context, call *plugin.Call, next plugin.Next, rec *Record) ([]byte, error) {
	var dup []string
	prior := only(call.Request, applyPriorState, "prior_state", &dup)
	ch := m.change(rec, prior, only(call.Request, applyPlannedState, "planned_state", &dup), false)
	ch.dup = dup
	var denied []byte
	for _, d := range m.judge(ch, rec) {
		if d.severity == severityError {
			denied = appendDiagnostic(denied, diagOf("ApplyResourceChange"), d.severity, d.summary, d.detail)
		}
	}
	if denied == nil {
		return next(ctx, call.Request)
	}
	m.mu.Lock()
	k, ok := m.kept[keptKey(rec.Name, prior)]
	m.mu.Unlock()
	if !ok { // no plan seen for it: what tofu planned to keep is the best there is
		k = keptState{private: plugin.WireField(call.Request, applyPlannedPrivate), identity: plugin.WireField(call.Request, applyPlannedIdentity)}
	}
	// The prior state tofu sent back as it reads it: protobuf merges repeated occurrences, which
	// their concatenation is.
	resp := protowire.AppendBytes(protowire.AppendTag(nil, applyNewState, protowire.BytesType), bytes.Join(plugin.WireFields(call.Request, applyPriorState), nil))
	if len(k.private) > 0 {
		resp = protowire.AppendBytes(protowire.AppendTag(resp, applyNewPrivate, protowire.BytesType), k.private)
	}
	if len(k.identity) > 0 {
		resp = protowire.AppendBytes(protowire.AppendTag(resp, applyNewIdentity, protowire.BytesType), k.identity)
	}
	return append(resp, denied...), nil
}

// before judges a call on its request: a deny answers with the rules' diagnostics (for a
// function, its error) and the provider never sees the call; warnings are added to its answer.
func (m *middleware) before(ctx context.Context, call *plugin.Call, next plugin.Next, rec *Record, ch Change) ([]byte, error) {
	vs := m.judge(ch, rec)
	if denies(vs) {
		return m.refusal(rec.RPC, vs), nil
	}
	resp, err := next(ctx, call.Request)
	if err != nil {
		return nil, err
	}
	return m.withWarnings(rec.RPC, resp, vs), nil
}

// denies reports whether any verdict is an error.
func denies(vs []verdict) bool {
	for _, v := range vs {
		if v.severity == severityError {
			return true
		}
	}
	return false
}

// refusal is the answer to a denied call: its diagnostics, or a function's error.
func (m *middleware) refusal(rpc string, vs []verdict) []byte {
	if rpc == "CallFunction" {
		var text []string
		for _, v := range vs {
			if v.severity == severityError {
				text = append(text, v.summary+": "+v.detail)
			}
		}
		fe := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), strings.Join(text, "; "))
		return protowire.AppendBytes(protowire.AppendTag(nil, callFunctionError, protowire.BytesType), fe)
	}
	var resp []byte
	for _, v := range vs {
		resp = appendDiagnostic(resp, diagOf(rpc), v.severity, v.summary, v.detail)
	}
	return resp
}

// withWarnings adds warn verdicts to a response (for a function, which has no warnings, they go
// to oprov's stderr).
func (m *middleware) withWarnings(rpc string, resp []byte, vs []verdict) []byte {
	for _, v := range vs {
		if diagOf(rpc) == 0 {
			m.cfg.Warn(v.summary + ": " + v.detail)
			continue
		}
		resp = appendDiagnostic(resp, diagOf(rpc), v.severity, v.summary, v.detail)
	}
	return resp
}

// imported judges what an import brings in: each imported object, as a change from nothing.
func (m *middleware) imported(ctx context.Context, call *plugin.Call, next plugin.Next, rec *Record) ([]byte, error) {
	resp, err := next(ctx, call.Request)
	if err != nil {
		return nil, err
	}
	var vs []verdict
	for _, ir := range plugin.WireFields(resp, importedResources) {
		typ := string(plugin.WireField(ir, importedType))
		ch := Change{Kind: "resource", Type: typ, Action: "import", Provider: m.cfg.Provider}
		m.values(&ch, rec, m.resources, typ, nil, only(ir, importedState, "imported_resources.state", &ch.dup))
		vs = append(vs, m.judge(ch, rec)...)
	}
	if denies(vs) {
		return m.refusal(rec.RPC, vs), nil
	}
	return m.withWarnings(rec.RPC, resp, vs), nil
}

// move judges a state move across types on its result: prior is the source object as stored
// (decoded when its type is this provider's), planned the object of the target type.
func (m *middleware) move(ctx context.Context, call *plugin.Call, next plugin.Next, rec *Record) ([]byte, error) {
	resp, err := next(ctx, call.Request)
	if err != nil {
		return nil, err
	}
	src, target := string(plugin.WireField(call.Request, moveSourceType)), rec.Name
	ch := Change{Kind: "resource", Type: target, SourceType: src, Action: "move", Provider: m.cfg.Provider}
	m.values(&ch, rec, m.resources, target, nil, only(resp, moveTargetState, "target_state", &ch.dup))
	if ch.Err == nil {
		raw := plugin.WireField(only(call.Request, moveSourceState, "source_state", &ch.dup), rawStateJSON)
		rs, ok := m.resources[src]
		switch {
		case len(raw) == 0:
		case ok && string(plugin.WireField(call.Request, moveSourceProvider)) == m.cfg.Provider || ok && len(plugin.WireField(call.Request, moveSourceProvider)) == 0:
			v, err := ctyjson.Unmarshal(raw, rs.ty)
			if err != nil {
				ch.Err = fmt.Errorf("the source %s object: %w", src, err)
				break
			}
			ch.Prior = goValue(v, rs.block, false)
			rec.Prior = wholeSecret // a moved source's secrecy is not known (pkg/protocol: MovedSource)
		default:
			// Another provider's type: no schema to redact it with, so the audit says only that.
			if err := json.Unmarshal(raw, &ch.Prior); err != nil {
				ch.Err = fmt.Errorf("the source %s object: %w", src, err)
			}
			rec.Prior = wholeSecret
		}
		if ch.Prior != nil { // wholly secret in the audit: none of it goes into an error's text
			set := map[string]bool{}
			for _, s := range ch.secrets {
				set[s] = true
			}
			allForms(ch.Prior, set)
			ch.secrets = secretList(set)
		}
	}
	vs := m.judge(ch, rec)
	if denies(vs) {
		return m.refusal(rec.RPC, vs), nil
	}
	return m.withWarnings(rec.RPC, resp, vs), nil
}

// configChange is the change a data source read or an ephemeral open makes: its configuration,
// as planned.
func (m *middleware) configChange(rec *Record, schemas map[string]schema, configDV []byte) Change {
	ch := Change{Kind: rec.Kind, Type: rec.Name, Action: rec.Action, Provider: m.cfg.Provider}
	m.values(&ch, rec, schemas, rec.Name, nil, configDV)
	return ch
}

// functionChange gives a function's arguments as planned: a list, each decoded with its
// parameter's type.
func (m *middleware) functionChange(rec *Record, args [][]byte) Change {
	ch := Change{Kind: "function", Type: rec.Name, Action: "call", Provider: m.cfg.Provider}
	f, ok := m.functions[rec.Name]
	if !ok {
		ch.Err = fmt.Errorf("function %s is not in the provider's schema", rec.Name)
		return ch
	}
	vals := []any{}
	for i, a := range args {
		var p *plugin.Parameter
		switch {
		case i < len(f.Parameters):
			p = f.Parameters[i]
		case f.VariadicParameter != nil:
			p = f.VariadicParameter
		default:
			ch.Err = fmt.Errorf("function %s: argument %d has no parameter", rec.Name, i+1)
			return ch
		}
		ty, err := ctyjson.UnmarshalType(p.Type)
		if err == nil {
			var v cty.Value
			if v, err = decodeDynamic(a, ty); err == nil {
				vals = append(vals, plainValue(v, false))
				continue
			}
		}
		ch.Err = fmt.Errorf("function %s: argument %d: %w", rec.Name, i+1, err)
		return ch
	}
	ch.Planned = vals
	set := map[string]bool{}
	allForms(vals, set) // every argument is wholly secret in the audit
	ch.secrets = secretList(set)
	if m.cfg.Audit != nil && m.cfg.Audit.Values {
		// Rules see the arguments; the audit does not: oprov cannot know which of them tofu held
		// as sensitive (pkg/protocol: FunctionArgument is wholly secret).
		hidden := make([]any, len(vals))
		for i := range hidden {
			hidden[i] = wholeSecret
		}
		rec.Planned = hidden
	}
	return ch
}

// values decodes prior and planned values of a type from schemas into a change (for the rules)
// and the record (for the audit); a value that does not decode sets ch.Err.
func (m *middleware) values(ch *Change, rec *Record, schemas map[string]schema, typ string, priorDV, plannedDV []byte) (prior, planned cty.Value, ok bool) {
	sc, found := schemas[typ]
	if !found {
		ch.Err = fmt.Errorf("%s %s is not in the provider's schema", ch.Kind, typ)
		m.noteDecode(typ, ch.Err)
		return cty.NilVal, cty.NilVal, false
	}
	var err1, err2 error
	prior, err1 = decodeDynamic(priorDV, sc.ty)
	planned, err2 = decodeDynamic(plannedDV, sc.ty)
	if err := errors.Join(err1, err2); err != nil {
		ch.Err = fmt.Errorf("%s values do not decode: %w", typ, err)
		m.noteDecode(typ, ch.Err)
		return cty.NilVal, cty.NilVal, false
	}
	ch.Prior, ch.Planned = goValue(prior, sc.block, false), goValue(planned, sc.block, false)
	redPrior, redPlanned := goValue(prior, sc.block, true), goValue(planned, sc.block, true)
	set := map[string]bool{}
	secretsOf(ch.Prior, redPrior, set)
	secretsOf(ch.Planned, redPlanned, set)
	ch.secrets = secretList(set)
	if m.cfg.Audit != nil && m.cfg.Audit.Values {
		rec.Prior, rec.Planned = redPrior, redPlanned
	}
	return prior, planned, true
}

// noteDecode warns once per type about values that do not decode when no rule will say so.
func (m *middleware) noteDecode(typ string, err error) {
	if len(m.cfg.Rules) > 0 || m.cfg.Schema == nil {
		return // every rule that reads the values reports it; without a schema nothing is decoded
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.noted[typ] {
		m.noted[typ] = true
		m.cfg.Warn(fmt.Sprintf("%s: %v: the audit has no values for it", m.cfg.Provider, err))
	}
}

// change decodes a resource change and derives its action: create, update, replace, delete or
// no-op.
func (m *middleware) change(rec *Record, priorDV, plannedDV []byte, replace bool) Change {
	ch := Change{Kind: "resource", Type: rec.Name, Provider: m.cfg.Provider}
	prior, planned, ok := m.values(&ch, rec, m.resources, rec.Name, priorDV, plannedDV)
	if ok {
		ch.Action = action(prior, planned, replace)
	} else {
		ch.Action = rawAction(priorDV, plannedDV, replace)
	}
	rec.Action = ch.Action
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
		mp := plugin.WireField(dv, dynamicMsgpack)
		return len(mp) == 0 && len(plugin.WireField(dv, dynamicJSON)) == 0 || len(mp) == 1 && mp[0] == 0xc0
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
	case string(plugin.WireField(priorDV, dynamicMsgpack)) == string(plugin.WireField(plannedDV, dynamicMsgpack)):
		return "no-op"
	}
	return "update"
}

type verdict struct {
	severity        uint64
	summary, detail string
}

// only reads a singular message field the middleware judges. One that occurs more than once is
// the merge of its occurrences to the peer (protobuf's rule), not the value read here: its name
// is added to dup, and judge denies the call.
func only(msg []byte, n protowire.Number, name string, dup *[]string) []byte {
	v, repeated := plugin.WireFieldOnly(msg, n)
	if repeated {
		*dup = append(*dup, name)
	}
	return v
}

// judge evaluates every rule on a change and records what matched. A rule that cannot be
// evaluated counts against the call: a deny rule denies it, naming the error; a warn rule warns.
func (m *middleware) judge(ch Change, rec *Record) []verdict {
	var out []verdict
	what := ch.Action + " of " + ch.Type
	for _, f := range ch.dup {
		out = append(out, verdict{severityError, fmt.Sprintf("oprov refuses the %s: field %s occurs more than once", what, f),
			"the message holds the singular field " + f + " more than once; protobuf merges the occurrences, which oprov does not judge, so it refuses the call (a provider or client bug)"})
	}
	for _, r := range m.cfg.Rules {
		hit, err := r.Matches(ch)
		var v verdict
		switch {
		case err != nil && r.Effect == Deny:
			v = verdict{severityError, fmt.Sprintf("oprov policy %q cannot be evaluated on %s, so it denies it", r.Name, what), err.Error()}
		case err != nil:
			v = verdict{severityWarning, fmt.Sprintf("oprov policy %q cannot be evaluated on %s", r.Name, what), err.Error()}
		case !hit:
			continue
		case r.Effect == Deny:
			v = verdict{severityError, fmt.Sprintf("oprov policy %q denies %s", r.Name, what), r.Message}
		default:
			v = verdict{severityWarning, fmt.Sprintf("oprov policy %q warns about %s", r.Name, what), r.Message}
		}
		d := Decision{Rule: r.Name, Effect: r.Effect, Message: r.Message}
		if err != nil {
			d.Error = err.Error()
		}
		rec.Policy = append(rec.Policy, d)
		out = append(out, v)
	}
	return out
}
