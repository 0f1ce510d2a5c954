package recording

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// Ignore is an attribute replay does not compare: of one resource or data source type, or of
// every type ("*").
type Ignore struct {
	Type string
	Path Path
}

// ParseIgnore reads TYPE.ATTR[.ATTR...] (TYPE may be *).
func ParseIgnore(s string) (Ignore, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || parts[0] == "" {
		return Ignore{}, fmt.Errorf("%q: give TYPE.ATTRIBUTE, such as aws_instance.tags or *.tags", s)
	}
	p := Path{}
	for _, a := range parts[1:] {
		if a == "" {
			return Ignore{}, fmt.Errorf("%q: an empty attribute name", s)
		}
		p = append(p, a)
	}
	return Ignore{Type: parts[0], Path: p}, nil
}

// Replayer answers one provider's calls from a recording.
type Replayer struct {
	addr     string
	p        *ProviderRec
	ignore   []Ignore
	mu       sync.Mutex
	used     map[*CallRec]bool
	byKey    map[string][]*CallRec
	finals   map[string][]any // by resource type: objects the recording shows existing, as compared
	configs  map[string][]any // beside finals: the configuration each was applied with (nil: read)
	versions map[string]int64
	index    map[string]*callIndex    // by call and type (index.go)
	finalIdx map[string][]*finalIndex // by type
	driven   bool                     // answers provider check --json, which has no --replay-ignore (hint.go)
}

// Replayers gives a replayer for each provider of the recording, in the order they appear.
func (r *Recording) Replayers(ignore []Ignore) []*Replayer {
	var out []*Replayer
	key := r.replayKey()
	for _, addr := range r.Order {
		p := r.Providers[addr]
		p.schemas.key = key
		rp := &Replayer{addr: addr, p: p, ignore: ignore, used: map[*CallRec]bool{}, byKey: map[string][]*CallRec{},
			finals: map[string][]any{}, configs: map[string][]any{}, versions: map[string]int64{}}
		for name, sc := range p.Line.Schema.ResourceSchemas {
			rp.versions[name] = sc.Version
		}
		for _, c := range p.Calls {
			k := c.Line.Call + "\x00" + c.Line.Type
			rp.byKey[k] = append(rp.byKey[k], c)
			var state any
			switch c.Line.Call {
			case "ApplyResourceChange", "ReadResource":
				state = c.Line.Response["new_state"]
			}
			if v, err := asValue(state); err == nil && v.Value != nil && c.Line.Error == nil {
				rp.finals[c.Line.Type] = append(rp.finals[c.Line.Type], state)
				var cfg any
				if c.Line.Call == "ApplyResourceChange" {
					cfg = c.Line.Request["config"]
				}
				rp.configs[c.Line.Type] = append(rp.configs[c.Line.Type], cfg)
			}
		}
		rp.indexCalls()
		rp.indexFinals()
		out = append(out, rp)
	}
	return out
}

// Address is the provider's address.
func (rp *Replayer) Address() string { return rp.addr }

// Protocol is the plugin protocol the provider spoke.
func (rp *Replayer) Protocol() int { return rp.p.Line.Protocol }

// Diff is one difference between a call and a recorded one.
type Diff struct {
	Field    string
	Path     Path
	Recorded any
	Now      any
}

func (d Diff) String() string {
	if s, ok := secretDiff(d); ok {
		return s
	}
	where := d.Field
	if len(d.Path) > 0 {
		where += "." + d.Path.String()
	}
	return fmt.Sprintf("%s: recorded %s, now %s", where, show(d.Recorded), show(d.Now))
}

type mark string

const (
	unknownMark  mark = "(known after apply)"
	redactedMark mark = redactedText
)

func show(v any) string {
	switch v := v.(type) {
	case mark:
		return showMark(v)
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("%q", v)
	case map[string]any:
		return "an object"
	case []any:
		return fmt.Sprintf("%d elements", len(v))
	}
	return fmt.Sprint(v)
}

// Answer answers one call. A call the recording does not hold is answered with an error
// diagnostic (for a function, its error) naming how it differs from the nearest recorded one.
func (rp *Replayer) Answer(_ context.Context, call *plugin.Call) ([]byte, error) {
	rpc := call.RPC()
	switch rpc {
	case "GetProviderSchema", "GetSchema":
		return rp.p.Line.SchemaWire, nil
	case "StopProvider", "Stop":
		return nil, nil
	}
	spec, known := callSpecs()[rpc]
	if !known {
		return nil, status.Errorf(codes.Unimplemented, "oprov replay: %s: %v", rpc, unmodelledError(true))
	}
	reqSpec, respSpec := spec.request, spec.response
	dec, err := decodeMsg(call.Request, reqSpec, "", rp.p.schemas, false)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "oprov replay: %s: %v", rpc, err)
	}
	if u := dec[unmodelledKey]; u != nil {
		return nil, status.Errorf(codes.Unimplemented, "oprov replay: %s: the request holds fields oprov does not model (numbers %v); a recording cannot say what the provider answered to them", rpc, u)
	}
	// Compared as recorded: secrets redacted, with their digests by the recording's key.
	cmp, err := decodeMsg(call.Request, reqSpec, "", rp.p.schemas, true)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "oprov replay: %s: %v", rpc, err)
	}
	live, err := normal(cmp)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "oprov replay: %s: %v", rpc, err)
	}
	typ, _ := live["type_name"].(string)
	if typ == "" {
		typ, _ = live["name"].(string)
	}
	rp.mu.Lock()
	var match *CallRec
	for _, c := range rp.lookup(rpc, typ, live) {
		if match == nil || rp.used[match] && !rp.used[c] {
			match = c
		}
	}
	if match != nil {
		rp.used[match] = true
	}
	rp.mu.Unlock()
	if match != nil {
		if e := match.Line.Error; e != nil {
			return nil, status.Error(codeOf(e.Code), escapeControls(e.Message)) // tofu prints it
		}
		fill := rp.filler(reqSpec, typ, dec)
		resp, err := encodeMsg(quoteTexts(match.Line.Response), respSpec, typ, rp.p.schemas, fill)
		if err == nil {
			resp, err = rp.withIgnored(rpc, typ, resp, dec)
		}
		if err != nil {
			return nil, status.Errorf(codes.Internal, "oprov replay: line %d: %v", match.LineNo, err)
		}
		return resp, nil
	}
	resp, ok, why := rp.derive(rpc, typ, call.Request, live)
	if ok {
		if resp, err = rp.withIgnored(rpc, typ, resp, dec); err != nil {
			return nil, status.Errorf(codes.Internal, "oprov replay: %s: %v", rpc, err)
		}
		return resp, nil
	}
	if why != nil {
		return rp.refuse(rpc, typ, nil, why)
	}
	nearest, nearestDiffs := rp.nearest(reqSpec, rpc, typ, live)
	return rp.refuse(rpc, typ, nearest, nearestDiffs)
}

// nearest finds the recorded call of the same kind that differs least from a live one.
func (rp *Replayer) nearest(reqSpec *message, rpc, typ string, live Msg) (*CallRec, []Diff) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	nearest, nearestDiffs := (*CallRec)(nil), []Diff(nil)
	for _, c := range rp.byKey[rpc+"\x00"+typ] {
		diffs := rp.compare(reqSpec, typ, c.Line.Request, live)
		if len(diffs) > 0 && (nearest == nil || score(diffs) < score(nearestDiffs)) {
			nearest, nearestDiffs = c, diffs
		}
	}
	return nearest, nearestDiffs
}

// score ranks a recorded call's differences: fewer is nearer, and a difference from an unknown
// value counts for more than one between two known values.
func score(diffs []Diff) int {
	n := 0
	for _, d := range diffs {
		n += 2
		if d.Recorded == unknownMark {
			n++
		}
	}
	return n
}

// compare gives how a live request differs from a recorded one, in the fields that make a call
// the same (docs/recording-format.md).
func (rp *Replayer) compare(spec *message, typ string, recorded, live Msg) []Diff {
	var diffs []Diff
	if spec == nil || recorded[unmodelledKey] != nil || live[unmodelledKey] != nil {
		// A call or field oprov does not model cannot be compared: that is a difference.
		return append(diffs, Diff{Field: "request", Recorded: "parts oprov does not model", Now: "cannot be compared"})
	}
	for _, f := range spec.fields {
		if !f.compared {
			continue
		}
		rv, lv := recorded[f.name], live[f.name]
		switch f.kind {
		case kValue, kRawState:
			rl, ll := []any{rv}, []any{lv}
			if f.repeated {
				rl, _ = rv.([]any)
				ll, _ = lv.([]any)
				if len(rl) != len(ll) {
					diffs = append(diffs, Diff{Field: f.name, Recorded: fmt.Sprintf("%d", len(rl)), Now: fmt.Sprintf("%d", len(ll))})
					continue
				}
			}
			for i := range rl {
				name := f.name
				if f.repeated {
					name = fmt.Sprintf("%s[%d]", f.name, i)
				}
				diffs = append(diffs, rp.diffValue(name, typ, marked(rl[i]), marked(ll[i]))...)
			}
		default:
			if !reflect.DeepEqual(rv, lv) {
				diffs = append(diffs, Diff{Field: f.name, Recorded: rv, Now: lv})
			}
		}
	}
	return diffs
}

// marked gives a recorded value's JSON with its unknown and redacted places marked.
func marked(v any) any {
	if v == nil {
		return absent{}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	tree := m["value"]
	if _, ok := m["json"]; ok { // a stored state
		tree = m["json"]
	}
	tree = deepCopy(tree)
	for _, key := range []string{"unknown", "redacted"} {
		ps, _ := asPaths(m[key])
		var secrets []mark
		if key == "redacted" {
			secrets = secretMarks(m, len(ps))
		}
		for i, p := range ps {
			mk := unknownMark
			if key == "redacted" {
				mk = secrets[i]
			}
			tree = setAt(tree, p, mk)
		}
	}
	return tree
}

type absent struct{}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

func setAt(tree any, p Path, v any) any {
	if len(p) == 0 {
		return v
	}
	switch t := tree.(type) {
	case map[string]any:
		if k, ok := p[0].(string); ok {
			t[k] = setAt(t[k], p[1:], v)
		}
	case []any:
		if i, ok := p[0].(int); ok && i >= 0 && i < len(t) {
			t[i] = setAt(t[i], p[1:], v)
		}
	case nil:
		if k, ok := p[0].(string); ok {
			return map[string]any{k: setAt(nil, p[1:], v)}
		}
	}
	return tree
}

// diffValue compares two marked values: a redacted place only a redacted one with the same
// digest, an unknown one only an unknown; ignored attributes are skipped.
func (rp *Replayer) diffValue(field, typ string, rec, now any) []Diff {
	var out []Diff
	var walk func(p Path, a, b any)
	walk = func(p Path, a, b any) {
		if rp.ignored(typ, p) {
			return
		}
		as, _ := secretMark(a)
		bs, _ := secretMark(b)
		if as || bs {
			if !sameSecret(a, b) {
				out = append(out, Diff{field, clonePath(p), a, b})
			}
			return
		}
		switch av := a.(type) {
		case map[string]any:
			bv, ok := b.(map[string]any)
			if !ok {
				out = append(out, Diff{field, clonePath(p), a, b})
				return
			}
			keys := map[string]bool{}
			for k := range av {
				keys[k] = true
			}
			for k := range bv {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				walk(append(p, k), av[k], bv[k])
			}
			return
		case []any:
			bv, ok := b.([]any)
			if !ok || len(av) != len(bv) {
				out = append(out, Diff{field, clonePath(p), a, b})
				return
			}
			for i := range av {
				walk(append(p, i), av[i], bv[i])
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			out = append(out, Diff{field, clonePath(p), a, b})
		}
	}
	walk(nil, rec, now)
	return out
}

func (rp *Replayer) ignored(typ string, p Path) bool {
	for _, ig := range rp.ignoresOf(typ) {
		if len(p) >= len(ig.Path) {
			same := true
			for i := range ig.Path {
				if p[i] != ig.Path[i] {
					same = false
					break
				}
			}
			if same {
				return true
			}
		}
	}
	return false
}

// filler gives the live request's value at a path, for a redacted place in an answer: from the
// request's values of the same type (configuration first, then planned or proposed, then prior).
func (rp *Replayer) filler(spec *message, typ string, dec Msg) func(Path) (cty.Value, bool) {
	if spec == nil {
		return nil
	}
	var vals []cty.Value
	var ty cty.Type
	for _, name := range []string{"config", "planned_state", "proposed_new_state", "current_state", "prior_state"} {
		f := spec.byName(name)
		if f == nil {
			continue
		}
		rv, ok := dec[name].(*Value)
		if !ok || wholly(rv.Redacted) {
			continue
		}
		b, err := rp.p.schemas.blockFor(f.role, typ, 0)
		if err != nil {
			continue
		}
		if v, err := rv.toCty(b.ty, nil); err == nil {
			vals, ty = append(vals, v), b.ty // every field of the request has the type's schema
		}
	}
	// An upgrade's stored object, read by the schema it has now: its redacted places are those
	// of the upgraded state the recording answers with.
	if f := spec.byName("raw_state"); f != nil && f.kind == kRawState {
		if rs, ok := dec["raw_state"].(*RawState); ok && rs.JSON != nil && !wholly(rs.Redacted) {
			if b, err := rp.p.schemas.blockFor(roleResource, typ, 0); err == nil {
				if js, err := json.Marshal(rs.JSON); err == nil {
					if v, err := ctyjson.Unmarshal(js, b.ty); err == nil {
						vals, ty = append(vals, v), b.ty
					}
				}
			}
		}
	}
	return func(p Path) (cty.Value, bool) {
		for _, v := range vals {
			if x, ok := ctyAt(v, ty, p); ok && x.IsKnown() && !x.IsNull() {
				return x, true
			}
		}
		return cty.NilVal, false
	}
}

// ctyAt gives the part of v, a value of the schema's type st, at a recorded path p. Where st is
// dynamic, a recorded path has a "value" step (the wrapper {"type", "value"}) that v lacks.
func ctyAt(v cty.Value, st cty.Type, p Path) (cty.Value, bool) {
	for _, s := range p {
		if v.IsNull() || !v.IsKnown() {
			return cty.NilVal, false
		}
		ty := v.Type()
		if st == cty.DynamicPseudoType {
			if s != "value" {
				return cty.NilVal, false
			}
			st = ty // what is inside has the type the value has
			continue
		}
		switch s := s.(type) {
		case string:
			switch {
			case ty.IsObjectType() && ty.HasAttribute(s):
				v = v.GetAttr(s)
			case ty.IsMapType() && v.HasIndex(cty.StringVal(s)).True():
				v = v.Index(cty.StringVal(s))
			default:
				return cty.NilVal, false
			}
		case int:
			if !(ty.IsListType() || ty.IsTupleType()) || v.LengthInt() <= s {
				return cty.NilVal, false
			}
			v = v.Index(cty.NumberIntVal(int64(s)))
		default:
			return cty.NilVal, false
		}
		if st = stepType(st, s); st == cty.NilType {
			return cty.NilVal, false
		}
	}
	return v, true
}

// stepType is the type of the part of a value of type st at step s, or NilType.
func stepType(st cty.Type, s any) cty.Type {
	name, isName := s.(string)
	i, isIndex := s.(int)
	switch {
	case st.IsObjectType() && isName && st.HasAttribute(name):
		return st.AttributeType(name)
	case st.IsMapType() && isName, (st.IsListType() || st.IsSetType()) && isIndex:
		return st.ElementType()
	case st.IsTupleType() && isIndex && i < st.Length():
		return st.TupleElementType(i)
	}
	return cty.NilType
}

// derive answers the calls a recording implies without holding them, for an object it shows
// existing (its last recorded state): an upgrade of a state already at the schema's version gives
// it back as it is; a read gives it back unchanged; a plan whose proposed state is that state
// plans no change. why, when set, says how the call differs from such a call.
func (rp *Replayer) derive(rpc, typ string, req []byte, live Msg) (resp []byte, ok bool, why []Diff) {
	switch rpc {
	case "UpgradeResourceState":
		b, found := rp.p.schemas.resources[typ]
		v, _ := asInt(live["version"])
		raw := plugin.WireField(plugin.WireField(req, upgradeRawState), rawStateJSON)
		if !found || v != rp.versions[typ] || raw == nil {
			return nil, false, nil
		}
		val, err := ctyjson.Unmarshal(raw, b.ty)
		if err != nil {
			return nil, false, nil
		}
		mp, err := ctymsgpack.Marshal(val, b.ty)
		if err != nil {
			return nil, false, nil
		}
		dv := protowire.AppendBytes(protowire.AppendTag(nil, dynamicMsgpack, protowire.BytesType), mp)
		return protowire.AppendBytes(protowire.AppendTag(nil, upgradeUpgraded, protowire.BytesType), dv), true, nil
	case "ReadResource":
		if _, ok := rp.known(typ, live["current_state"]); !ok {
			return nil, false, nil
		}
		out := protowire.AppendBytes(protowire.AppendTag(nil, readNewState, protowire.BytesType), plugin.WireField(req, readCurrentState))
		if priv := plugin.WireField(req, readPrivate); len(priv) > 0 {
			out = protowire.AppendBytes(protowire.AppendTag(out, readNewPrivate, protowire.BytesType), priv)
		}
		return out, true, nil
	case "PlanResourceChange":
		configs, ok := rp.known(typ, live["prior_state"])
		if !ok || live["proposed_new_state"] == nil {
			return nil, false, nil
		}
		// The configuration the object was applied with, unchanged, plans no change; an
		// object only read must be proposed as it is.
		var changes []Diff
		for i, cfg := range configs {
			var d []Diff
			if cfg == nil {
				d = rp.diffValue("proposed_new_state", typ, marked(live["prior_state"]), marked(live["proposed_new_state"]))
			} else {
				d = rp.diffValue("config", typ, marked(normalValue(cfg)), marked(live["config"]))
			}
			if len(d) == 0 {
				changes = nil
				break
			}
			if i == 0 || len(d) < len(changes) {
				changes = d
			}
		}
		if len(changes) > 0 {
			return nil, false, changes
		}
		// No change: the object as it is.
		out := protowire.AppendBytes(protowire.AppendTag(nil, planPlanned, protowire.BytesType), plugin.WireField(req, planPrior))
		if priv := plugin.WireField(req, planPriorPrivate); len(priv) > 0 {
			out = protowire.AppendBytes(protowire.AppendTag(out, planPlannedPrivate, protowire.BytesType), priv)
		}
		if rp.legacy(typ) {
			out = protowire.AppendVarint(protowire.AppendTag(out, planLegacy, protowire.VarintType), 1)
		}
		return out, true, nil
	}
	return nil, false, nil
}

// legacy reports whether the provider planned this type with the legacy type system (SDKv2).
func (rp *Replayer) legacy(typ string) bool {
	fi := rp.finalIdx[typ] // index.go: found once, not for every call
	return len(fi) > 0 && fi[0].legacy
}

// known reports whether a live state is one the recording shows existing, and gives the
// configurations it was applied with (nil for one only read).
func (rp *Replayer) known(typ string, state any) ([]any, bool) {
	if v, err := asValue(state); err != nil || v.Value == nil {
		return nil, false
	}
	var out []any
	for _, fi := range rp.finalIdx[typ] {
		out = append(out, fi.keys[rp.stateKey(typ, state, nil)]...) // the live state has its own secrets' digests
	}
	return out, len(out) > 0
}

// normalValue gives a recorded value as JSON reads it back.
func normalValue(v any) any {
	m, err := normal(Msg{"v": v})
	if err != nil {
		return v
	}
	return m["v"]
}

// refuse answers a call the recording does not hold.
func (rp *Replayer) refuse(rpc, typ string, nearest *CallRec, diffs []Diff) ([]byte, error) {
	what := rpc
	if typ != "" {
		what += " of " + typ
	}
	summary := fmt.Sprintf("oprov replay: the recording holds no %s like this one", what)
	var detail strings.Builder
	switch {
	case nearest != nil:
		fmt.Fprintf(&detail, "It differs from the nearest recorded call (line %d) at:\n", nearest.LineNo)
	case len(diffs) > 0:
		detail.WriteString("The recording shows this object, but not this change to it:\n")
	default:
		detail.WriteString("The recording holds no call of this kind.\n")
	}
	const most = 10
	var attr Path
	for i, d := range diffs {
		if i == most {
			fmt.Fprintf(&detail, "  ... and %d more\n", len(diffs)-most)
			break
		}
		fmt.Fprintf(&detail, "  %s\n", d)
		if attr == nil && len(d.Path) > 0 && (d.Field == "config" || d.Field == "proposed_new_state") {
			attr = d.Path
		}
	}
	if typ != "" && len(diffs) > 0 && len(diffs[0].Path) > 0 {
		if s, ok := diffs[0].Path[0].(string); ok {
			detail.WriteString(rp.differsHint(typ, s))
		}
	} else {
		detail.WriteString("Record again with oprov run --record.")
	}
	if rpc == "CallFunction" {
		fe := protowire.AppendString(protowire.AppendTag(nil, functionErrorText, protowire.BytesType), summary+": "+detail.String())
		return protowire.AppendBytes(protowire.AppendTag(nil, callFunctionError, protowire.BytesType), fe), nil
	}
	n := diagField(rpc)
	if n == 0 {
		return nil, status.Error(codes.FailedPrecondition, summary+": "+detail.String())
	}
	var d []byte
	d = protowire.AppendVarint(protowire.AppendTag(d, diagSeverity, protowire.VarintType), 1) // error
	d = protowire.AppendString(protowire.AppendTag(d, diagSummary, protowire.BytesType), summary)
	d = protowire.AppendString(protowire.AppendTag(d, diagDetail, protowire.BytesType), strings.TrimSpace(detail.String()))
	if attr != nil {
		if pm, err := pathMsg(attrOnly(attr)); err == nil && len(pm) > 0 {
			d = protowire.AppendBytes(protowire.AppendTag(d, diagAttribute, protowire.BytesType), pm)
		}
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), d), nil
}

// attrOnly keeps a path's leading attribute names: what a diagnostic can point at in the
// configuration.
func attrOnly(p Path) Path {
	var out Path
	for _, s := range p {
		if _, ok := s.(string); !ok {
			break
		}
		out = append(out, s)
	}
	return out
}

func codeOf(name string) codes.Code {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == name {
			return c
		}
	}
	return codes.Unknown
}
