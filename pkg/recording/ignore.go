package recording

import (
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/protocol"
)

// An attribute --replay-ignore leaves out of the comparison is never left out of the answer:
// the answer takes its value from the request, so a changed ignored attribute shows as a change
// in the plan, never as "No changes".

// ignoredSource says, for each call whose answer is a state, the answer's field that holds it and
// the request's field its ignored attributes are taken from: a null there is taken too (nulls,
// else the recorded value stays), and an unknown one (unknowns, else the recorded value stays).
var ignoredSource = map[string]struct {
	resp     protowire.Number
	from     string
	role     role
	nulls    bool
	unknowns bool
}{
	"PlanResourceChange":  {resp: planPlanned, from: "proposed_new_state", role: roleResource, nulls: true, unknowns: true},
	"ApplyResourceChange": {resp: protocol.Num("ApplyResourceChange.Response", "new_state"), from: "planned_state", role: roleResource, nulls: true},
	"ReadResource":        {resp: readNewState, from: "current_state", role: roleResource, nulls: true},
	"ReadDataSource":      {resp: protocol.Num("ReadDataSource.Response", "state"), from: "config", role: roleData},
}

// ignoresOf gives the ignored attributes that apply to a call about typ: a resource type's or a
// data source's, never a provider configuration's or a function's arguments, whose answers hold
// no state to take an ignored value from (ignoring them would turn a difference into no change).
func (rp *Replayer) ignoresOf(typ string) []Ignore {
	s := rp.p.schemas
	if _, ok := s.resources[typ]; !ok {
		if _, ok := s.data[typ]; !ok {
			return nil
		}
	}
	var out []Ignore
	for _, ig := range rp.ignore {
		if ig.Type == "*" || ig.Type == typ {
			out = append(out, ig)
		}
	}
	return out
}

// withIgnored gives an answer (resp, its wire bytes) to a call (dec, decoded with its secrets)
// with each ignored attribute's value taken from the request.
func (rp *Replayer) withIgnored(rpc, typ string, resp []byte, dec Msg) ([]byte, error) {
	src, ok := ignoredSource[rpc]
	var paths []Path
	for _, ig := range rp.ignoresOf(typ) {
		paths = append(paths, ig.Path)
	}
	if !ok || len(paths) == 0 {
		return resp, nil
	}
	rv, ok := dec[src.from].(*Value)
	if !ok || wholly(rv.Redacted) {
		return resp, nil
	}
	b, err := rp.p.schemas.blockFor(src.role, typ, 0)
	if err != nil {
		return resp, nil
	}
	from, err := rv.toCty(b.ty, nil)
	if err != nil {
		return resp, nil
	}
	mp := plugin.WireField(plugin.WireField(resp, src.resp), dynamicMsgpack)
	if len(mp) == 0 {
		return resp, nil
	}
	v, err := ctymsgpack.Unmarshal(mp, b.ty)
	if err != nil {
		return nil, err
	}
	changed := false
	for _, p := range paths {
		x, ok := ctyAt(from, b.ty, p)
		if !ok || !x.IsKnown() && !src.unknowns {
			continue
		}
		cur, ok := ctyAt(v, b.ty, p)
		if !ok || x.IsKnown() && x.IsNull() && (!src.nulls || !cur.IsKnown()) {
			continue
		}
		if nv, ok := setCty(v, p, x); ok {
			v, changed = nv, true
		}
	}
	if !changed {
		return resp, nil
	}
	if mp, err = ctymsgpack.Marshal(v, b.ty); err != nil {
		return nil, err
	}
	dv := protowire.AppendBytes(protowire.AppendTag(nil, dynamicMsgpack, protowire.BytesType), mp)
	out := protowire.AppendBytes(protowire.AppendTag(nil, src.resp, protowire.BytesType), dv)
	plugin.WireWalk(resp, func(n protowire.Number, typ protowire.Type, value []byte) {
		if n == src.resp {
			return
		}
		vl := protowire.ConsumeFieldValue(n, typ, value)
		out = protowire.AppendTag(out, n, typ)
		out = append(out, value[:vl]...)
	})
	return out, nil
}

// setCty gives v with x at p, a path of attribute names and map keys (an ignored attribute's);
// ok is false where v has no such place.
func setCty(v cty.Value, p Path, x cty.Value) (out cty.Value, ok bool) {
	if len(p) == 0 {
		return x, true // of the type the schema gives both (Marshal checks it)
	}
	name, isName := p[0].(string)
	if !isName || v.IsNull() || !v.IsKnown() {
		return v, false
	}
	ty := v.Type()
	switch {
	case ty.IsObjectType() && ty.HasAttribute(name):
		attrs := v.AsValueMap()
		inner, ok := setCty(attrs[name], p[1:], x)
		if !ok {
			return v, false
		}
		attrs[name] = inner
		return cty.ObjectVal(attrs), true
	case ty.IsMapType() && v.HasIndex(cty.StringVal(name)).True():
		elems := v.AsValueMap()
		inner, ok := setCty(elems[name], p[1:], x)
		if !ok || !inner.Type().Equals(ty.ElementType()) {
			return v, false
		}
		elems[name] = inner
		return cty.MapVal(elems), true
	}
	return v, false
}
