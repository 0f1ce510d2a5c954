package recording

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// redactedText is what a recording holds in place of a secret: an attribute the schema marks
// sensitive or write-only, and every provider configuration value unless the recording keeps
// them. Replay takes any value where a recorded one is redacted.
const redactedText = "(redacted by oprov)"

// Path is where a value sits inside another: attribute names and map keys are strings, list,
// set and tuple positions are numbers. A dynamic value's own value is under "value".
type Path []any

// String spells a path as OpenTofu does: name.tags["a"].items[0].
func (p Path) String() string {
	var b strings.Builder
	for _, s := range p {
		switch s := s.(type) {
		case string:
			if b.Len() == 0 {
				b.WriteString(s)
			} else if isName(s) {
				b.WriteString("." + s)
			} else {
				b.WriteString("[" + strconv.Quote(s) + "]")
			}
		default:
			fmt.Fprintf(&b, "[%v]", s)
		}
	}
	if b.Len() == 0 {
		return "(the whole value)"
	}
	return b.String()
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func (p Path) key() string {
	b, _ := json.Marshal([]any(p))
	return string(b)
}

// Value is a value as a recording holds it: JSON as its type says (numbers exact, a dynamic
// part as {"type": ..., "value": ...}), with the places of unknown values (null in Value) and of
// redacted ones (redactedText in Value) listed beside it.
type Value struct {
	Value    any    `json:"value"`
	Unknown  []Path `json:"unknown,omitempty"`
	Redacted []Path `json:"redacted,omitempty"`
	// Digests are the redacted values' keyed digests, in the order of Redacted (digest.go).
	Digests []string `json:"digests,omitempty"`
	key     *Key     // what fromCty digests redacted values with
	texts   []string // the redacted values' texts, to keep them out of the call's diagnostics (scrub.go)
}

// fromCty encodes v of type ty. Sensitive paths (by the schema) are redacted, with their digests
// by key (none when nil).
func fromCty(v cty.Value, ty cty.Type, sensitive func(Path) bool, key *Key) (*Value, error) {
	out := &Value{key: key}
	var err error
	out.Value, err = encodeValue(v, ty, nil, out, sensitive)
	if err != nil {
		return nil, err
	}
	// An object's attributes come in map order: the places are sorted, so that the same value
	// is the same bytes in every recording.
	sortPaths(out.Unknown)
	sortRedacted(out.Redacted, out.Digests)
	return out, nil
}

// sortPaths puts paths in one order: step by step, numbers before names, numbers by value,
// names by bytes; a path before the longer ones it begins.
func sortPaths(ps []Path) {
	sort.SliceStable(ps, func(i, j int) bool { return comparePaths(ps[i], ps[j]) < 0 })
}

// sortRedacted puts redacted paths in sortPaths' order, each digest (when there are digests)
// moving with its path.
func sortRedacted(ps []Path, digests []string) {
	if len(digests) != len(ps) {
		sortPaths(ps)
		return
	}
	idx := make([]int, len(ps))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return comparePaths(ps[idx[i]], ps[idx[j]]) < 0 })
	sp, sd := make([]Path, len(ps)), make([]string, len(ps))
	for i, k := range idx {
		sp[i], sd[i] = ps[k], digests[k]
	}
	copy(ps, sp)
	copy(digests, sd)
}

func comparePaths(a, b Path) int {
	for k := 0; k < len(a) && k < len(b); k++ {
		if c := compareSteps(a[k], b[k]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func compareSteps(a, b any) int {
	ai, aNum := stepInt(a)
	bi, bNum := stepInt(b)
	switch {
	case aNum && bNum:
		return cmp.Compare(ai, bi)
	case aNum != bNum:
		if aNum {
			return -1
		}
		return 1
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func stepInt(s any) (int64, bool) {
	switch s := s.(type) {
	case int:
		return int64(s), true
	case int64:
		return s, true
	case json.Number:
		i, err := s.Int64()
		return i, err == nil
	}
	return 0, false
}

func encodeValue(v cty.Value, ty cty.Type, p Path, out *Value, sensitive func(Path) bool) (any, error) {
	if !v.IsKnown() {
		out.Unknown = append(out.Unknown, clonePath(p))
		return nil, nil
	}
	if v.IsNull() {
		return nil, nil
	}
	if sensitive != nil && sensitive(p) {
		return out.redact(p, ty, v), nil
	}
	if ty == cty.DynamicPseudoType {
		tj, err := ctyjson.MarshalType(v.Type())
		if err != nil {
			return nil, err
		}
		// The schema still decides what inside is secret (a list of blocks holding a dynamic
		// attribute is dynamic as a whole, its sensitive attributes included): it reads the
		// path without the wrapper's "value" step.
		inner := sensitive
		if sensitive != nil {
			at := len(p)
			inner = func(q Path) bool { return sensitive(append(clonePath(q[:at]), q[at+1:]...)) }
		}
		wrapped, err := encodeValue(v, v.Type(), append(p, "value"), out, inner)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": json.RawMessage(tj), "value": wrapped}, nil
	}
	switch {
	case ty == cty.String:
		return v.AsString(), nil
	case ty == cty.Bool:
		return v.True(), nil
	case ty == cty.Number:
		return json.Number(v.AsBigFloat().Text('g', -1)), nil
	case ty.IsObjectType():
		m := map[string]any{}
		for name, at := range ty.AttributeTypes() {
			e, err := encodeValue(v.GetAttr(name), at, append(p, name), out, sensitive)
			if err != nil {
				return nil, err
			}
			m[name] = e
		}
		return m, nil
	case ty.IsMapType():
		m := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			ev, err := encodeValue(e, ty.ElementType(), append(p, k.AsString()), out, sensitive)
			if err != nil {
				return nil, err
			}
			m[k.AsString()] = ev
		}
		return m, nil
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		l := []any{}
		i := 0
		for it := v.ElementIterator(); it.Next(); i++ {
			_, e := it.Element()
			et := cty.DynamicPseudoType
			switch {
			case ty.IsTupleType():
				et = ty.TupleElementType(i)
			default:
				et = ty.ElementType()
			}
			ev, err := encodeValue(e, et, append(p, i), out, sensitive)
			if err != nil {
				return nil, err
			}
			l = append(l, ev)
		}
		return l, nil
	}
	return nil, fmt.Errorf("at %s: a value of type %s cannot be recorded", p, ty.FriendlyName())
}

func clonePath(p Path) Path { return append(Path(nil), p...) }

// toCty decodes a recorded value as type ty. Where the value is redacted, fill (when set) gives
// the value to use, else the marker itself stands for a string and null for anything else.
func (rv *Value) toCty(ty cty.Type, fill func(Path) (cty.Value, bool)) (v cty.Value, err error) {
	// cty panics on collections whose elements differ in type (a hand-edited dynamic value):
	// that is an error in the recording.
	defer func() {
		if r := recover(); r != nil {
			v, err = cty.NilVal, fmt.Errorf("the value does not fit its type: %v", r)
		}
	}()
	unknown := map[string]bool{}
	for _, p := range rv.Unknown {
		unknown[p.key()] = true
	}
	redacted := map[string]bool{}
	for _, p := range rv.Redacted {
		redacted[p.key()] = true
	}
	d := decoder{unknown: unknown, redacted: redacted, fill: fill}
	return d.decode(rv.Value, ty, nil)
}

type decoder struct {
	unknown, redacted map[string]bool
	fill              func(Path) (cty.Value, bool)
}

func (d *decoder) decode(j any, ty cty.Type, p Path) (cty.Value, error) {
	if len(d.unknown) > 0 && d.unknown[p.key()] {
		return cty.UnknownVal(ty), nil
	}
	if len(d.redacted) > 0 && d.redacted[p.key()] {
		if d.fill != nil {
			// A dynamic place takes the live value's own type.
			if v, ok := d.fill(p); ok && (ty == cty.DynamicPseudoType || v.Type().Equals(ty)) {
				return v, nil
			}
		}
		if ty == cty.String {
			return cty.StringVal(redactedText), nil
		}
		return cty.NullVal(ty), nil
	}
	if j == nil {
		return cty.NullVal(ty), nil
	}
	if ty == cty.DynamicPseudoType {
		m, ok := j.(map[string]any)
		if !ok {
			return badJSON(j, ty, p, `{"type": ..., "value": ...}`)
		}
		tb, err := json.Marshal(m["type"])
		if err != nil {
			return cty.NilVal, err
		}
		inner, err := ctyjson.UnmarshalType(tb)
		if err != nil {
			return cty.NilVal, fmt.Errorf("at %s: the dynamic value's type: %v", p, err)
		}
		return d.decode(m["value"], inner, append(p, "value"))
	}
	switch {
	case ty.IsPrimitiveType():
		return decodePrimitive(j, ty, p)
	case ty.IsObjectType():
		return d.decodeObject(j, ty, p)
	case ty.IsMapType():
		return d.decodeMap(j, ty, p)
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		return d.decodeSequence(j, ty, p)
	}
	return cty.NilVal, fmt.Errorf("at %s: type %s cannot be replayed", p, ty.FriendlyName())
}

// badJSON is the error for JSON j of the wrong kind where a value of type ty was wanted.
func badJSON(j any, ty cty.Type, p Path, want string) (cty.Value, error) {
	return cty.NilVal, fmt.Errorf("at %s: want %s for %s, have %s", p, want, ty.FriendlyName(), jsonKind(j))
}

// decodePrimitive decodes a string, a bool or a number (its text bounded before it is parsed).
func decodePrimitive(j any, ty cty.Type, p Path) (cty.Value, error) {
	switch ty {
	case cty.String:
		s, ok := j.(string)
		if !ok {
			return badJSON(j, ty, p, "a string")
		}
		return cty.StringVal(s), nil
	case cty.Bool:
		b, ok := j.(bool)
		if !ok {
			return badJSON(j, ty, p, "true or false")
		}
		return cty.BoolVal(b), nil
	case cty.Number:
		n, ok := j.(json.Number)
		if !ok {
			return badJSON(j, ty, p, "a number")
		}
		if len(n) > maxNumberText {
			// Parsing grows faster than the text: a hostile recording could stall replay.
			return cty.NilVal, fmt.Errorf("at %s: a number written with %d characters; a recording holds at most %d", p, len(n), maxNumberText)
		}
		f, _, err := big.ParseFloat(string(n), 10, 512, big.ToNearestEven)
		if err != nil {
			return cty.NilVal, fmt.Errorf("at %s: %v", p, err)
		}
		return cty.NumberVal(f), nil
	}
	return cty.NilVal, fmt.Errorf("at %s: type %s cannot be replayed", p, ty.FriendlyName())
}

// decodeObject decodes every attribute of an object type; an attribute the type lacks is an error.
func (d *decoder) decodeObject(j any, ty cty.Type, p Path) (cty.Value, error) {
	m, ok := j.(map[string]any)
	if !ok {
		return badJSON(j, ty, p, "an object")
	}
	attrs := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		v, err := d.decode(m[name], at, append(p, name))
		if err != nil {
			return cty.NilVal, err
		}
		attrs[name] = v
	}
	for name := range m {
		if !ty.HasAttribute(name) {
			return cty.NilVal, fmt.Errorf("at %s: attribute %q is not in the schema", p, name)
		}
	}
	return cty.ObjectVal(attrs), nil
}

// decodeMap decodes a map's elements in key order (so an error names the same key each time).
func (d *decoder) decodeMap(j any, ty cty.Type, p Path) (cty.Value, error) {
	m, ok := j.(map[string]any)
	if !ok {
		return badJSON(j, ty, p, "an object")
	}
	if len(m) == 0 {
		return cty.MapValEmpty(ty.ElementType()), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	elems := map[string]cty.Value{}
	for _, k := range keys {
		v, err := d.decode(m[k], ty.ElementType(), append(p, k))
		if err != nil {
			return cty.NilVal, err
		}
		elems[k] = v
	}
	return cty.MapVal(elems), nil
}

// decodeSequence decodes a list, a set or a tuple from a JSON array.
func (d *decoder) decodeSequence(j any, ty cty.Type, p Path) (cty.Value, error) {
	l, ok := j.([]any)
	if !ok {
		return badJSON(j, ty, p, "an array")
	}
	if ty.IsTupleType() && len(l) != len(ty.TupleElementTypes()) {
		return cty.NilVal, fmt.Errorf("at %s: %d elements for a tuple of %d", p, len(l), len(ty.TupleElementTypes()))
	}
	var elems []cty.Value
	for i, e := range l {
		et := cty.DynamicPseudoType
		if ty.IsTupleType() {
			et = ty.TupleElementType(i)
		} else {
			et = ty.ElementType()
		}
		v, err := d.decode(e, et, append(p, i))
		if err != nil {
			return cty.NilVal, err
		}
		elems = append(elems, v)
	}
	switch {
	case ty.IsTupleType():
		return cty.TupleVal(elems), nil
	case len(elems) == 0 && ty.IsListType():
		return cty.ListValEmpty(ty.ElementType()), nil
	case len(elems) == 0:
		return cty.SetValEmpty(ty.ElementType()), nil
	case ty.IsListType():
		return safeList(elems, p)
	}
	return safeSet(elems, p)
}

// safeList and safeSet turn cty's panics on elements of differing types into errors.
func safeList(elems []cty.Value, p Path) (v cty.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("at %s: the elements differ in type", p)
		}
	}()
	return cty.ListVal(elems), nil
}

func safeSet(elems []cty.Value, p Path) (v cty.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("at %s: the elements differ in type", p)
		}
	}()
	return cty.SetVal(elems), nil
}

func jsonKind(j any) string {
	switch j.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", j)
}

// maxNumberText bounds a number's text in a recording: cty's numbers hold 512 bits, some 155
// digits, and nothing longer than this is ever recorded.
const maxNumberText = 1000

// decodeJSON reads JSON with numbers kept exact.
func decodeJSON(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}
