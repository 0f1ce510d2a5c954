package stdiohost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"

	"github.com/zclconf/go-cty/cty"
)

// unknownKey marks an unknown value in what the optional hooks see: {"$unknown": true}.
const unknownKey = "$unknown"

// toJSON writes v as protocol JSON. Unknown values are written as {"$unknown": true} when
// withUnknown is set and as null otherwise. Numbers keep their full precision.
func toJSON(v cty.Value, withUnknown bool) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, v, withUnknown); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v cty.Value, withUnknown bool) error {
	v, _ = v.Unmark()
	switch {
	case !v.IsKnown():
		if withUnknown {
			b.WriteString(`{"` + unknownKey + `":true}`)
		} else {
			b.WriteString("null")
		}
		return nil
	case v.IsNull():
		b.WriteString("null")
		return nil
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		s, _ := json.Marshal(v.AsString())
		b.Write(s)
	case ty == cty.Number:
		b.WriteString(numberText(v.AsBigFloat()))
	case ty == cty.Bool:
		b.WriteString(strconv.FormatBool(v.True()))
	case ty.IsListType(), ty.IsSetType(), ty.IsTupleType():
		b.WriteByte('[')
		i := 0
		for it := v.ElementIterator(); it.Next(); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			_, e := it.Element()
			if err := writeJSON(b, e, withUnknown); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case ty.IsMapType(), ty.IsObjectType():
		b.WriteByte('{')
		i := 0
		for it := v.ElementIterator(); it.Next(); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			k, e := it.Element()
			ks, _ := json.Marshal(k.AsString())
			b.Write(ks)
			b.WriteByte(':')
			if err := writeJSON(b, e, withUnknown); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("a value of type %s cannot be written as JSON", ty.FriendlyName())
	}
	return nil
}

// numberText writes a number exactly, in the shortest decimal form that reads back to the same
// value: plain digits for everyday magnitudes, an exponent beyond (1e+400, not 401 digits).
func numberText(f *big.Float) string {
	if exp := f.MantExp(nil); exp > -100 && exp < 200 {
		return f.Text('f', -1)
	}
	return f.Text('g', -1)
}

// pathError is a value that does not fit the schema, at an attribute path.
type pathError struct {
	path cty.Path
	msg  string
}

func (e *pathError) Error() string {
	if len(e.path) == 0 {
		return e.msg
	}
	return pathString(e.path) + ": " + e.msg
}

func pathString(p cty.Path) string {
	var b bytes.Buffer
	for i, s := range p {
		switch s := s.(type) {
		case cty.GetAttrStep:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		case cty.IndexStep:
			if !s.Key.IsKnown() {
				b.WriteString("[*]")
			} else if s.Key.Type() == cty.String {
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			} else {
				fmt.Fprintf(&b, "[%s]", numberText(s.Key.AsBigFloat()))
			}
		}
	}
	return b.String()
}

// decodeJSON reads protocol JSON (numbers kept exact) into an untyped tree.
func decodeJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// fromJSON converts an untyped JSON tree to a value of type ty. Where an object leaves an
// attribute out, the attribute of keep (a value of the same type, or null) is used instead.
// {"$unknown": true} is read as unknown only when allowUnknown is set.
func fromJSON(j any, ty cty.Type, keep cty.Value, path cty.Path, allowUnknown bool) (cty.Value, error) {
	if j == nil {
		return cty.NullVal(ty), nil
	}
	if m, ok := j.(map[string]any); ok && len(m) == 1 && m[unknownKey] == true {
		if !allowUnknown {
			return cty.NilVal, &pathError{path, "an unknown value ({\"$unknown\": true}) is allowed only in a plan hook's answer"}
		}
		return cty.UnknownVal(ty), nil
	}
	switch {
	case ty == cty.DynamicPseudoType:
		return dynamicFromJSON(j, path)
	case ty.IsPrimitiveType():
		return primitiveFromJSON(j, ty, path)
	case ty.IsListType(), ty.IsSetType():
		return collectionFromJSON(j, ty, path, allowUnknown)
	case ty.IsMapType():
		return mapFromJSON(j, ty, path, allowUnknown)
	case ty.IsObjectType():
		return objectFromJSON(j, ty, keep, path, allowUnknown)
	case ty.IsTupleType():
		arr, ok := j.([]any)
		if !ok || len(arr) != len(ty.TupleElementTypes()) {
			return cty.NilVal, &pathError{path, fmt.Sprintf("want an array of %d elements", len(ty.TupleElementTypes()))}
		}
		vals := make([]cty.Value, len(arr))
		for i, e := range arr {
			v, err := fromJSON(e, ty.TupleElementType(i), cty.NilVal, path.Index(cty.NumberIntVal(int64(i))), allowUnknown)
			if err != nil {
				return cty.NilVal, err
			}
			vals[i] = v
		}
		return cty.TupleVal(vals), nil
	}
	return cty.NilVal, &pathError{path, "unsupported type " + ty.FriendlyName()}
}

func primitiveFromJSON(j any, ty cty.Type, path cty.Path) (cty.Value, error) {
	switch ty {
	case cty.String:
		switch x := j.(type) {
		case string:
			return cty.StringVal(x), nil
		case json.Number: // as tofu converts a number to a string
			return cty.StringVal(x.String()), nil
		case bool:
			return cty.StringVal(strconv.FormatBool(x)), nil
		}
		return cty.NilVal, &pathError{path, fmt.Sprintf("want a string, got %s", jsonKind(j))}
	case cty.Number:
		switch x := j.(type) {
		case json.Number:
			v, err := parseNumber(x.String())
			if err != nil {
				return cty.NilVal, &pathError{path, err.Error()}
			}
			return v, nil
		case string:
			if v, err := parseNumber(x); err == nil {
				return v, nil
			}
		}
		return cty.NilVal, &pathError{path, fmt.Sprintf("want a number, got %s", jsonKind(j))}
	default: // cty.Bool
		if x, ok := j.(bool); ok {
			return cty.BoolVal(x), nil
		}
		return cty.NilVal, &pathError{path, fmt.Sprintf("want a bool, got %s", jsonKind(j))}
	}
}

// maxNumberText bounds the text of a number parsed (a JSON number, or a string read as a
// number): its digits, a sign, a point and an exponent (wire.go).
const maxNumberText = maxNumberDigits + 8

// parseNumber parses a number as cty does, bounded in length before parsing (big.ParseFloat is
// quadratic in it), and refuses one that is not finite.
func parseNumber(s string) (cty.Value, error) {
	if len(s) > maxNumberText {
		return cty.NilVal, fmt.Errorf("a number of %d characters; at most %d are allowed", len(s), maxNumberText)
	}
	if b := []byte(s); len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9') {
		if _, _, err := scanNumber(b, 0); err != nil { // the digits' and exponent's bounds
			return cty.NilVal, err
		}
	}
	v, err := cty.ParseNumberVal(s)
	if err != nil {
		return cty.NilVal, err
	}
	if v.AsBigFloat().IsInf() {
		return cty.NilVal, fmt.Errorf("%s is not a finite number", clip([]byte(s), 40))
	}
	return v, nil
}

func collectionFromJSON(j any, ty cty.Type, path cty.Path, allowUnknown bool) (cty.Value, error) {
	arr, ok := j.([]any)
	if !ok {
		return cty.NilVal, &pathError{path, fmt.Sprintf("want an array, got %s", jsonKind(j))}
	}
	et := ty.ElementType()
	vals := make([]cty.Value, 0, len(arr))
	for i, e := range arr {
		step := path.Index(cty.NumberIntVal(int64(i)))
		if ty.IsSetType() {
			step = path.Index(cty.UnknownVal(et)) // a set element has no index
		}
		v, err := fromJSON(e, et, cty.NilVal, step, allowUnknown)
		if err != nil {
			return cty.NilVal, err
		}
		vals = append(vals, v)
	}
	if ty.IsSetType() {
		if len(vals) == 0 {
			return cty.SetValEmpty(et), nil
		}
		return cty.SetVal(vals), nil
	}
	if len(vals) == 0 {
		return cty.ListValEmpty(et), nil
	}
	return cty.ListVal(vals), nil
}

func mapFromJSON(j any, ty cty.Type, path cty.Path, allowUnknown bool) (cty.Value, error) {
	m, ok := j.(map[string]any)
	if !ok {
		return cty.NilVal, &pathError{path, fmt.Sprintf("want an object, got %s", jsonKind(j))}
	}
	if len(m) == 0 {
		return cty.MapValEmpty(ty.ElementType()), nil
	}
	vals := make(map[string]cty.Value, len(m))
	for k, e := range m {
		v, err := fromJSON(e, ty.ElementType(), cty.NilVal, path.Index(cty.StringVal(k)), allowUnknown)
		if err != nil {
			return cty.NilVal, err
		}
		vals[k] = v
	}
	return cty.MapVal(vals), nil
}

func objectFromJSON(j any, ty cty.Type, keep cty.Value, path cty.Path, allowUnknown bool) (cty.Value, error) {
	m, ok := j.(map[string]any)
	if !ok {
		return cty.NilVal, &pathError{path, fmt.Sprintf("want an object, got %s", jsonKind(j))}
	}
	var extra []string
	for k := range m {
		if !ty.HasAttribute(k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return cty.NilVal, &pathError{path.GetAttr(extra[0]), "the schema has no such attribute"}
	}
	vals := make(map[string]cty.Value, len(ty.AttributeTypes()))
	for name, at := range ty.AttributeTypes() {
		e, present := m[name]
		if !present {
			vals[name] = cty.NullVal(at)
			if keep != cty.NilVal && !keep.IsNull() && keep.IsKnown() {
				vals[name] = keep.GetAttr(name)
			}
			continue
		}
		var inner cty.Value = cty.NilVal
		if keep != cty.NilVal && !keep.IsNull() && keep.IsKnown() {
			inner = keep.GetAttr(name)
		}
		v, err := fromJSON(e, at, inner, path.GetAttr(name), allowUnknown)
		if err != nil {
			return cty.NilVal, err
		}
		vals[name] = v
	}
	return cty.ObjectVal(vals), nil
}

// dynamicFromJSON reads a value of type "dynamic": its type is what the JSON implies.
func dynamicFromJSON(j any, path cty.Path) (cty.Value, error) {
	switch x := j.(type) {
	case string:
		return cty.StringVal(x), nil
	case bool:
		return cty.BoolVal(x), nil
	case json.Number:
		return primitiveFromJSON(x, cty.Number, path)
	case []any:
		vals := make([]cty.Value, len(x))
		for i, e := range x {
			v, err := dynamicFromJSON(e, path.Index(cty.NumberIntVal(int64(i))))
			if err != nil {
				return cty.NilVal, err
			}
			vals[i] = v
		}
		return cty.TupleVal(vals), nil
	case map[string]any:
		vals := make(map[string]cty.Value, len(x))
		for k, e := range x {
			v, err := dynamicFromJSON(e, path.GetAttr(k))
			if err != nil {
				return cty.NilVal, err
			}
			vals[k] = v
		}
		return cty.ObjectVal(vals), nil
	}
	return cty.NullVal(cty.DynamicPseudoType), nil
}

func jsonKind(j any) string {
	switch j.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a bool"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}
