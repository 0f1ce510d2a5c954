package middleware

import (
	"fmt"
	"math"
	"math/big"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/oprov/oprov/pkg/plugin"
)

// redacted stands in for the value of an attribute the schema marks sensitive or write-only
// (plugin.Attribute.Secret, the rule every surface applies).
const redacted = "(sensitive)"

// wholeSecret stands in for a value none of which the audit keeps: one whose secrecy oprov
// cannot know (pkg/protocol's Whole: function arguments, a moved object's source).
const wholeSecret = "(sensitive: not recorded)"

// unknown stands in for a value known only after apply.
const unknown = "(known after apply)"

// unencodable marks, in the audit, a value JSON cannot hold (a number beyond float64, 1e400):
// it is written as a string, this marker followed by the value's own text.
const unencodable = "(unencodable) "

// decodeDynamic decodes a DynamicValue message (msgpack, or JSON) as type t. A missing value
// decodes as null.
func decodeDynamic(dv []byte, t cty.Type) (cty.Value, error) {
	if mp := plugin.WireField(dv, dynamicMsgpack); len(mp) > 0 {
		return ctymsgpack.Unmarshal(mp, t)
	}
	if js := plugin.WireField(dv, dynamicJSON); len(js) > 0 {
		return ctyjson.Unmarshal(js, t)
	}
	return cty.NullVal(t), nil
}

// goValue turns a value of a block's type into plain Go values (maps, lists, strings, numbers,
// bools, nil) for CEL and JSON. With redact, sensitive attributes become redacted.
func goValue(v cty.Value, b *plugin.Block, redact bool) any {
	if v.IsNull() {
		return nil
	}
	if !v.IsKnown() {
		return unknown
	}
	if b == nil || !v.Type().IsObjectType() {
		return plainValue(v, redact)
	}
	out := map[string]any{}
	for name := range v.Type().AttributeTypes() {
		av := v.GetAttr(name)
		switch a, nb := b.Attributes[name], b.BlockTypes[name]; {
		case a != nil && a.Secret() && redact && !av.IsNull():
			out[name] = redacted
		case a != nil && a.NestedType != nil:
			out[name] = nested(av, a.NestedType.NestingMode, &plugin.Block{Attributes: a.NestedType.Attributes}, redact)
		case nb != nil:
			out[name] = nested(av, nb.NestingMode, nb.Block, redact)
		default:
			out[name] = plainValue(av, redact)
		}
	}
	return out
}

// nested converts a nested block or nested attribute value by its nesting mode: one object, or a
// collection of them. A dynamic list arrives as a tuple and a dynamic map as an object.
func nested(v cty.Value, mode string, b *plugin.Block, redact bool) any {
	if v.IsNull() || !v.IsKnown() || mode == "single" || mode == "group" || mode == "" {
		return goValue(v, b, redact)
	}
	if !v.CanIterateElements() {
		return plainValue(v, redact)
	}
	if mode == "map" {
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = goValue(e, b, redact)
		}
		return out
	}
	out := []any{}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, goValue(e, b, redact))
	}
	return out
}

// plainValue converts a value with no schema below it; for the audit (redact), numbers JSON
// cannot hold become marked strings.
func plainValue(v cty.Value, forAudit bool) any {
	if forAudit {
		return auditPlain(v)
	}
	return plain(v)
}

// auditPlain is plain with every number JSON cannot hold written as a marked string.
func auditPlain(v cty.Value) any {
	switch {
	case v.IsNull() || !v.IsKnown():
		return plain(v)
	case v.Type() == cty.Number:
		f := v.AsBigFloat()
		if x, _ := f.Float64(); math.IsInf(x, 0) {
			return unencodable + f.Text('g', -1)
		}
		return number(f)
	case v.Type().IsObjectType() || v.Type().IsMapType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = auditPlain(e)
		}
		return out
	case v.CanIterateElements():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, auditPlain(e))
		}
		return out
	}
	return plain(v)
}

// plain converts a value with no schema below it.
func plain(v cty.Value) any {
	switch {
	case v.IsNull():
		return nil
	case !v.IsKnown():
		return unknown
	case v.Type() == cty.String:
		return v.AsString()
	case v.Type() == cty.Bool:
		return v.True()
	case v.Type() == cty.Number:
		return number(v.AsBigFloat())
	case v.Type().IsObjectType() || v.Type().IsMapType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out[k.AsString()] = plain(e)
		}
		return out
	case v.CanIterateElements():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, plain(e))
		}
		return out
	}
	return fmt.Sprintf("%#v", v)
}

// number gives an integer when the number is one, else a float.
func number(f *big.Float) any {
	if i, acc := f.Int64(); acc == big.Exact {
		return i
	}
	x, _ := f.Float64()
	return x
}
