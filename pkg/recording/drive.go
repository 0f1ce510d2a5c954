package recording

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// Driver drives one provider from JSON lines, with no tofu: each line a call, each answer a line
// (docs/replay-providers.md). The provider is a running one or a recording's replay.
type Driver struct {
	invoke     func(ctx context.Context, method string, req []byte) ([]byte, error)
	protocol   int
	schema     *plugin.ProviderSchema
	s          *schemas
	configured bool
	private    map[string][]byte // by type and id: what the provider keeps beside an object
}

// NewDriver drives a provider speaking protocol through invoke, which makes one unary call.
func NewDriver(protocol int, schema *plugin.ProviderSchema, invoke func(ctx context.Context, method string, req []byte) ([]byte, error)) (*Driver, error) {
	s, err := newSchemas(schema)
	if err != nil {
		return nil, err
	}
	s.keepConfig, s.keepFunctionResults = true, true
	return &Driver{invoke: invoke, protocol: protocol, schema: schema, s: s, private: map[string][]byte{}}, nil
}

// Driver drives the recording's replay of this provider (from then on, its refusals name what
// provider check --json can do).
func (rp *Replayer) Driver() (*Driver, error) {
	rp.driven = true
	return NewDriver(rp.Protocol(), rp.p.Line.Schema, func(ctx context.Context, method string, req []byte) ([]byte, error) {
		return rp.Answer(ctx, &plugin.Call{Method: method, Protocol: rp.Protocol(), Request: req})
	})
}

// Request is one line a driver reads.
type Request struct {
	Call   string            `json:"call"`
	Type   string            `json:"type,omitempty"`
	Config json.RawMessage   `json:"config,omitempty"`
	State  json.RawMessage   `json:"state,omitempty"`
	ID     string            `json:"id,omitempty"`
	Args   []json.RawMessage `json:"args,omitempty"`
}

// Answer is one line a driver writes.
type Answer struct {
	Call        string                 `json:"call"`
	Type        string                 `json:"type,omitempty"`
	OK          bool                   `json:"ok"`
	Error       string                 `json:"error,omitempty"`
	State       any                    `json:"state,omitempty"`
	Unknown     []Path                 `json:"unknown,omitempty"`
	Replace     []any                  `json:"requires_replace,omitempty"`
	Result      any                    `json:"result,omitempty"`
	Schema      *plugin.ProviderSchema `json:"schema,omitempty"`
	Diagnostics []any                  `json:"diagnostics,omitempty"`
}

// Do answers one line.
func (d *Driver) Do(ctx context.Context, line []byte) *Answer {
	var r Request
	if err := decodeJSON(line, &r); err != nil {
		return &Answer{Call: "?", Error: fmt.Sprintf("not a JSON call: %v", err)}
	}
	a := &Answer{Call: r.Call, Type: r.Type}
	if err := d.do(ctx, &r, a); err != nil {
		a.OK, a.Error = false, err.Error()
		return a
	}
	a.OK = true
	return a
}

// v5Names are protocol 5's names for calls protocol 6 renamed.
var v5Names = map[string]string{"ConfigureProvider": "Configure", "ValidateProviderConfig": "PrepareProviderConfig",
	"ValidateResourceConfig": "ValidateResourceTypeConfig", "ValidateDataResourceConfig": "ValidateDataSourceConfig"}

func (d *Driver) method(rpc string) string {
	if d.protocol == 5 {
		if n, ok := v5Names[rpc]; ok {
			rpc = n
		}
		return "/tfplugin5.Provider/" + rpc
	}
	return "/tfplugin6.Provider/" + rpc
}

func (d *Driver) do(ctx context.Context, r *Request, a *Answer) error {
	switch r.Call {
	case "schema":
		a.Schema = d.schema
		return nil
	case "configure":
		return d.configure(ctx, r.Config, a)
	case "plan", "create", "update", "delete", "read", "import", "data", "function":
	default:
		return fmt.Errorf("unknown call %q: give schema, configure, plan, create, read, update, delete, import, data or function", r.Call)
	}
	if !d.configured {
		if err := d.configure(ctx, nil, a); err != nil {
			return fmt.Errorf("the provider is not configured (send {\"call\":\"configure\",\"config\":{...}} first): %w", err)
		}
	}
	if r.Call == "function" {
		return d.function(ctx, r, a)
	}
	kind, rl := roleResource, d.s.resources
	if r.Call == "data" {
		kind, rl = roleData, d.s.data
	}
	b, ok := rl[r.Type]
	if !ok {
		return fmt.Errorf("%q is not a %s of this provider (it has %s)", r.Type, map[role]string{roleResource: "resource type", roleData: "data source"}[kind], names(rl))
	}
	switch r.Call {
	case "data":
		return d.data(ctx, r, b, a)
	case "read":
		st, err := d.value(r.State, b, "state", false)
		if err != nil {
			return err
		}
		return d.read(ctx, r.Type, st, b, a)
	case "import":
		return d.importResource(ctx, r, b, a)
	}
	return d.change(ctx, r, b, a)
}

// data reads the data source r names with r's configuration.
func (d *Driver) data(ctx context.Context, r *Request, b block, a *Answer) error {
	cfg, err := d.config(r.Config, b, "config")
	if err != nil {
		return err
	}
	if err := d.validate(ctx, "ValidateDataResourceConfig", r.Type, cfg, b); err != nil {
		return err
	}
	resp, err := d.call(ctx, "ReadDataSource", r.Type, fieldStr(1, r.Type), fieldDV(2, cfg, b.ty))
	if err != nil {
		return err
	}
	return d.result(resp, "state", a)
}

// importResource imports the object r.ID names, then reads it, as tofu does.
func (d *Driver) importResource(ctx context.Context, r *Request, b block, a *Answer) error {
	resp, err := d.call(ctx, "ImportResourceState", r.Type, fieldStr(1, r.Type), fieldStr(2, r.ID))
	if err != nil {
		return err
	}
	imp, _ := resp["imported_resources"].([]any)
	if len(imp) != 1 {
		return fmt.Errorf("the import gave %d objects; oprov reads one", len(imp))
	}
	m, _ := imp[0].(Msg)
	rv, _ := m["state"].(*Value)
	if rv == nil {
		return fmt.Errorf("the import gave no state")
	}
	st, err := rv.toCty(b.ty, nil)
	if err != nil {
		return err
	}
	if p, ok := m["private"].([]byte); ok {
		d.private[r.Type] = p
	}
	return d.read(ctx, r.Type, st, b, a)
}

// change plans r's change (plan), or plans and applies it (create, update, delete).
func (d *Driver) change(ctx context.Context, r *Request, b block, a *Answer) error {
	var prior, cfg cty.Value
	var err error
	if prior, err = d.value(r.State, b, "state", r.Call == "update" || r.Call == "delete"); err != nil {
		return err
	}
	if r.Call == "create" && r.State != nil {
		return fmt.Errorf("create takes no state: use update")
	}
	if r.Call == "delete" {
		cfg = cty.NullVal(b.ty)
	} else if cfg, err = d.config(r.Config, b, "config"); err != nil {
		return err
	}
	if !cfg.IsNull() {
		if err := d.validate(ctx, "ValidateResourceConfig", r.Type, cfg, b); err != nil {
			return err
		}
	}
	proposed, err := safeProposedNew(b, prior, cfg)
	if err != nil {
		return err
	}
	plan, err := d.call(ctx, "PlanResourceChange", r.Type, fieldStr(1, r.Type), fieldDV(2, prior, b.ty), fieldDV(3, proposed, b.ty),
		fieldDV(4, cfg, b.ty), fieldBytes5(d.private[r.Type]))
	if err != nil {
		return err
	}
	planned, _ := plan["planned_state"].(*Value)
	if planned == nil {
		planned = &Value{}
	}
	if r.Call == "plan" {
		if rr, ok := plan["requires_replace"].([]any); ok {
			a.Replace = rr
		}
		a.State, a.Unknown = planned.Value, planned.Unknown
		return nil
	}
	pv, err := planned.toCty(b.ty, nil)
	if err != nil {
		return err
	}
	priv, _ := plan["planned_private"].([]byte)
	resp, err := d.call(ctx, "ApplyResourceChange", r.Type, fieldStr(1, r.Type), fieldDV(2, prior, b.ty), fieldDV(3, pv, b.ty),
		fieldDV(4, cfg, b.ty), fieldBytes5(priv))
	if err != nil {
		return err
	}
	if p, ok := resp["private"].([]byte); ok {
		d.private[r.Type] = p
	}
	return d.result(resp, "new_state", a)
}

func (d *Driver) read(ctx context.Context, typ string, st cty.Value, b block, a *Answer) error {
	req := append(fieldStr(1, typ), fieldDV(2, st, b.ty)...)
	if p := d.private[typ]; len(p) > 0 {
		req = protowire.AppendBytes(protowire.AppendTag(req, 3, protowire.BytesType), p)
	}
	resp, err := d.call(ctx, "ReadResource", typ, req)
	if err != nil {
		return err
	}
	return d.result(resp, "new_state", a)
}

func (d *Driver) result(resp Msg, field string, a *Answer) error {
	if v, ok := resp[field].(*Value); ok {
		a.State, a.Unknown = v.Value, v.Unknown
	}
	return nil
}

// configure checks the provider configuration against the schema, then validates and configures.
func (d *Driver) configure(ctx context.Context, raw json.RawMessage, a *Answer) error {
	cfg, err := d.config(raw, d.s.provider, "provider configuration")
	if err != nil {
		return err
	}
	if err := d.validate(ctx, "ValidateProviderConfig", "", cfg, d.s.provider); err != nil {
		return err
	}
	resp, err := d.call(ctx, "ConfigureProvider", "", fieldStr(1, "oprov"), fieldDV(2, cfg, d.s.provider.ty))
	if err != nil {
		return err
	}
	a.Diagnostics = diagList(resp)
	d.configured = true
	return nil
}

func (d *Driver) validate(ctx context.Context, rpc, typ string, cfg cty.Value, b block) error {
	var req []byte
	switch rpc {
	case "ValidateProviderConfig":
		req = fieldDV(1, cfg, b.ty)
	default:
		req = append(fieldStr(1, typ), fieldDV(2, cfg, b.ty)...)
	}
	_, err := d.call(ctx, rpc, typ, req)
	return err
}

func (d *Driver) function(ctx context.Context, r *Request, a *Answer) error {
	f, ok := d.s.functions[r.Type]
	if !ok {
		return fmt.Errorf("%q is not a function of this provider", r.Type)
	}
	req := fieldStr(1, r.Type)
	for i, raw := range r.Args {
		b, err := d.s.blockFor(roleFuncArg, r.Type, i)
		if err != nil {
			return err
		}
		var j any
		if err := decodeJSON(raw, &j); err != nil {
			return fmt.Errorf("argument %d: %v", i+1, err)
		}
		v, err := (&Value{Value: j}).toCty(b.ty, nil)
		if err != nil {
			return fmt.Errorf("argument %d: %v", i+1, err)
		}
		req = append(req, fieldDV(2, v, b.ty)...)
	}
	if len(r.Args) < len(f.Parameters) {
		return fmt.Errorf("function %s takes %d arguments, not %d", r.Type, len(f.Parameters), len(r.Args))
	}
	resp, err := d.call(ctx, "CallFunction", r.Type, req)
	if err != nil {
		return err
	}
	if fe, ok := resp["error"].(Msg); ok {
		return fmt.Errorf("function %s: %v", r.Type, fe["text"])
	}
	if v, ok := resp["result"].(*Value); ok {
		a.Result = v.Value
	}
	return nil
}

// config reads a configuration of a block's type (value), shaped as tofu decodes one.
func (d *Driver) config(raw json.RawMessage, b block, what string) (cty.Value, error) {
	v, err := d.value(raw, b, what, true)
	if err != nil {
		return v, err
	}
	return configShape(b.b, v), nil
}

// value reads a JSON value of a block's type; missing required attributes are named.
func (d *Driver) value(raw json.RawMessage, b block, what string, required bool) (cty.Value, error) {
	if raw == nil || string(raw) == "null" {
		if !required {
			return cty.NullVal(b.ty), nil
		}
		raw = json.RawMessage("{}")
	}
	var j any
	if err := decodeJSON(raw, &j); err != nil {
		return cty.NilVal, fmt.Errorf("%s: %v", what, err)
	}
	v, err := (&Value{Value: j}).toCty(b.ty, nil)
	if err != nil {
		return cty.NilVal, fmt.Errorf("%s: %v", what, err)
	}
	if b.b != nil && required {
		var missing []string
		for name, at := range b.b.Attributes {
			if at.Required && v.GetAttr(name).IsNull() {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return cty.NilVal, fmt.Errorf("%s: missing required attribute %s", what, strings.Join(quoteAll(missing), ", "))
		}
	}
	return v, nil
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

func names(m map[string]block) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// call makes one call and decodes its answer; error diagnostics are an error.
func (d *Driver) call(ctx context.Context, rpc, typ string, parts ...[]byte) (Msg, error) {
	var req []byte
	for _, p := range parts {
		req = append(req, p...)
	}
	resp, err := d.invoke(ctx, d.method(rpc), req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rpc, err)
	}
	name := rpc
	if d.protocol == 5 {
		name = d.method(rpc)[len("/tfplugin5.Provider/"):]
	}
	m, err := decodeMsg(resp, callSpecs()[name].response, typ, d.s, false)
	if err != nil {
		return nil, fmt.Errorf("%s: the answer: %w", rpc, err)
	}
	var errs []string
	for _, dg := range diagList(m) {
		if dm, ok := dg.(Msg); ok && fmt.Sprint(dm["severity"]) == "1" {
			s := fmt.Sprint(dm["summary"])
			if det, ok := dm["detail"].(string); ok && det != "" {
				s += ": " + det
			}
			errs = append(errs, s)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", rpc, strings.Join(errs, "; "))
	}
	return m, nil
}

func diagList(m Msg) []any {
	l, _ := m["diagnostics"].([]any)
	return l
}

func fieldStr(n protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, n, protowire.BytesType), s)
}

func fieldDV(n protowire.Number, v cty.Value, ty cty.Type) []byte {
	mp, err := ctymsgpack.Marshal(v, ty)
	if err != nil {
		mp = []byte{0xc0}
	}
	dv := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), mp)
	return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), dv)
}

func fieldBytes5(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), p)
}
