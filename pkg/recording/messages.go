package recording

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// kind is how a message field is held in a recording.
type kind int

const (
	kString kind = iota
	kBytes       // base64
	kBool
	kInt
	kMessage
	kValue    // a DynamicValue, decoded by the schema (Value)
	kRawState // a RawState: its JSON as JSON, sensitive attributes redacted
	kPath     // an AttributePath, as a Path
)

// role says which schema a DynamicValue's type comes from.
type role int

const (
	roleNone role = iota
	roleProvider
	roleResource
	roleData
	roleFuncArg
	roleFuncResult
)

type field struct {
	num      protowire.Number
	name     string
	kind     kind
	repeated bool
	sub      *message
	role     role
	compared bool // part of what makes two calls the same (format.md: the same call)
}

// message is what a recording knows of a protocol message: the fields it names. Every other
// field is kept as it came, in "wire" (base64 of the fields' bytes).
type message struct {
	fields []field
}

func (m *message) byNum(n protowire.Number) *field {
	for i := range m.fields {
		if m.fields[i].num == n {
			return &m.fields[i]
		}
	}
	return nil
}

func (m *message) byName(name string) *field {
	for i := range m.fields {
		if m.fields[i].name == name {
			return &m.fields[i]
		}
	}
	return nil
}

var (
	diagnostic = &message{[]field{{num: 1, name: "severity", kind: kInt}, {num: 2, name: "summary", kind: kString},
		{num: 3, name: "detail", kind: kString}, {num: 4, name: "attribute", kind: kPath}}}
	diags = func(n protowire.Number) field {
		return field{num: n, name: "diagnostics", kind: kMessage, repeated: true, sub: diagnostic}
	}
	typeName = field{num: 1, name: "type_name", kind: kString, compared: true}
	config   = func(n protowire.Number, r role) field {
		return field{num: n, name: "config", kind: kValue, role: r, compared: true}
	}
	funcError   = &message{[]field{{num: 1, name: "text", kind: kString}, {num: 2, name: "function_argument", kind: kInt}}}
	imported    = &message{[]field{typeName, {num: 2, name: "state", kind: kValue, role: roleResource}, {num: 3, name: "private", kind: kBytes}}}
	emptyAnswer = &message{}
)

// call is what a recording knows of one RPC: its request and response.
type call struct{ request, response *message }

// calls are the RPCs whose messages a recording decodes, by their names in protocols 5 and 6
// (their field numbers agree). Any other RPC is kept whole as wire bytes, and two of its calls
// are the same when their request bytes are.
var calls = map[string]call{
	"ValidateProviderConfig": {&message{[]field{config(1, roleProvider)}}, &message{[]field{diags(2)}}},
	"PrepareProviderConfig": {&message{[]field{config(1, roleProvider)}},
		&message{[]field{{num: 1, name: "prepared_config", kind: kValue, role: roleProvider}, diags(2)}}},
	"ConfigureProvider":          {&message{[]field{{num: 1, name: "terraform_version", kind: kString}, config(2, roleProvider)}}, &message{[]field{diags(1)}}},
	"Configure":                  {&message{[]field{{num: 1, name: "terraform_version", kind: kString}, config(2, roleProvider)}}, &message{[]field{diags(1)}}},
	"ValidateResourceConfig":     {&message{[]field{typeName, config(2, roleResource)}}, &message{[]field{diags(1)}}},
	"ValidateResourceTypeConfig": {&message{[]field{typeName, config(2, roleResource)}}, &message{[]field{diags(1)}}},
	"ValidateDataResourceConfig": {&message{[]field{typeName, config(2, roleData)}}, &message{[]field{diags(1)}}},
	"ValidateDataSourceConfig":   {&message{[]field{typeName, config(2, roleData)}}, &message{[]field{diags(1)}}},
	"UpgradeResourceState": {&message{[]field{typeName, {num: 2, name: "version", kind: kInt, compared: true},
		{num: 3, name: "raw_state", kind: kRawState, compared: true}}},
		&message{[]field{{num: 1, name: "upgraded_state", kind: kValue, role: roleResource}, diags(2)}}},
	"ReadResource": {&message{[]field{typeName, {num: 2, name: "current_state", kind: kValue, role: roleResource, compared: true},
		{num: 3, name: "private", kind: kBytes}}},
		&message{[]field{{num: 1, name: "new_state", kind: kValue, role: roleResource}, diags(2), {num: 3, name: "private", kind: kBytes}}}},
	"PlanResourceChange": {&message{[]field{typeName,
		{num: 2, name: "prior_state", kind: kValue, role: roleResource, compared: true},
		{num: 3, name: "proposed_new_state", kind: kValue, role: roleResource, compared: true},
		config(4, roleResource), {num: 5, name: "prior_private", kind: kBytes}}},
		&message{[]field{{num: 1, name: "planned_state", kind: kValue, role: roleResource},
			{num: 2, name: "requires_replace", kind: kPath, repeated: true}, {num: 3, name: "planned_private", kind: kBytes},
			diags(4), {num: 5, name: "legacy_type_system", kind: kBool}}}},
	"ApplyResourceChange": {&message{[]field{typeName,
		{num: 2, name: "prior_state", kind: kValue, role: roleResource, compared: true},
		{num: 3, name: "planned_state", kind: kValue, role: roleResource, compared: true},
		config(4, roleResource), {num: 5, name: "planned_private", kind: kBytes}}},
		&message{[]field{{num: 1, name: "new_state", kind: kValue, role: roleResource}, {num: 2, name: "private", kind: kBytes},
			diags(3), {num: 4, name: "legacy_type_system", kind: kBool}}}},
	"ImportResourceState": {&message{[]field{typeName, {num: 2, name: "id", kind: kString, compared: true}}},
		&message{[]field{{num: 1, name: "imported_resources", kind: kMessage, repeated: true, sub: imported}, diags(2)}}},
	"ReadDataSource": {&message{[]field{typeName, config(2, roleData)}},
		&message{[]field{{num: 1, name: "state", kind: kValue, role: roleData}, diags(2)}}},
	"CallFunction": {&message{[]field{{num: 1, name: "name", kind: kString, compared: true},
		{num: 2, name: "arguments", kind: kValue, repeated: true, role: roleFuncArg, compared: true}}},
		&message{[]field{{num: 1, name: "result", kind: kValue, role: roleFuncResult}, {num: 2, name: "error", kind: kMessage, sub: funcError}}}},
	"StopProvider": {emptyAnswer, &message{[]field{{num: 1, name: "error", kind: kString}}}},
	"Stop":         {emptyAnswer, &message{[]field{{num: 1, name: "error", kind: kString}}}},
}

// diagField is where each decoded RPC's response keeps its diagnostics.
func diagField(rpc string) protowire.Number {
	c, ok := calls[rpc]
	if !ok {
		return 0
	}
	if f := c.response.byName("diagnostics"); f != nil {
		return f.num
	}
	return 0
}

// typer gives the type of a DynamicValue from its role, in the context of one call.
type typer interface {
	valueOf(r role, typeName string, index int, data []byte, redact bool) (*Value, error)
	encodeValue(r role, typeName string, index int, v *Value, fill func(Path) (cty.Value, bool)) ([]byte, error)
	rawState(typeName string, js []byte, redact bool) (*RawState, error)
}

// RawState is a stored object as upgrade sees it: its JSON, with the sensitive attributes
// redacted.
type RawState struct {
	JSON     any    `json:"json"`
	Redacted []Path `json:"redacted,omitempty"`
}

// Msg is a decoded message: its named fields, and the others' bytes.
type Msg map[string]any

// decodeMsg decodes a message's wire bytes by spec m. typeName is the call's type (a message's
// own type_name field overrides it for its values). With redact, secrets become redactedText.
func decodeMsg(b []byte, m *message, typeName string, t typer, redact bool) (Msg, error) {
	out := Msg{}
	if m == nil {
		if len(b) > 0 {
			out["wire"] = b
		}
		return out, nil
	}
	if tn := ownTypeName(b, m); tn != "" {
		typeName = tn
	}
	var rest []byte
	index := map[protowire.Number]int{}
	for len(b) > 0 {
		n, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return nil, fmt.Errorf("the message does not parse: %v", protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(n, typ, b[tl:])
		if vl < 0 {
			return nil, fmt.Errorf("field %d does not parse: %v", n, protowire.ParseError(vl))
		}
		whole, val := b[:tl+vl], b[tl:tl+vl]
		b = b[tl+vl:]
		f := m.byNum(n)
		if f == nil || (f.kind == kBool || f.kind == kInt) != (typ == protowire.VarintType) || f.kind != kBool && f.kind != kInt && typ != protowire.BytesType {
			rest = append(rest, whole...)
			continue
		}
		var v any
		if typ == protowire.VarintType {
			x, _ := protowire.ConsumeVarint(val)
			if f.kind == kBool {
				v = x != 0
			} else {
				v = int64(x)
			}
		} else {
			data, _ := protowire.ConsumeBytes(val)
			var err error
			if v, err = decodeField(f, data, typeName, index[n], t, redact); err != nil {
				return nil, fmt.Errorf("%s: %w", f.name, err)
			}
		}
		index[n]++
		if f.repeated {
			l, _ := out[f.name].([]any)
			out[f.name] = append(l, v)
		} else {
			out[f.name] = v
		}
	}
	if len(rest) > 0 {
		out["wire"] = rest
	}
	return out, nil
}

func ownTypeName(b []byte, m *message) string {
	if f := m.byName("type_name"); f == nil {
		if f = m.byName("name"); f == nil {
			return ""
		}
	}
	var tn string
	for len(b) > 0 {
		n, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return tn
		}
		vl := protowire.ConsumeFieldValue(n, typ, b[tl:])
		if vl < 0 {
			return tn
		}
		if f := m.byNum(n); f != nil && (f.name == "type_name" || f.name == "name") && typ == protowire.BytesType {
			s, _ := protowire.ConsumeBytes(b[tl:])
			tn = string(s)
		}
		b = b[tl+vl:]
	}
	return tn
}

func decodeField(f *field, data []byte, typeName string, index int, t typer, redact bool) (any, error) {
	switch f.kind {
	case kString:
		return string(data), nil
	case kBytes:
		return data, nil
	case kMessage:
		return decodeMsg(data, f.sub, typeName, t, redact)
	case kValue:
		return t.valueOf(f.role, typeName, index, data, redact)
	case kRawState:
		js := plugin.WireField(data, 1)
		if js == nil || plugin.WireField(data, 2) != nil { // a flatmap state is kept as it came
			return Msg{"wire": data}, nil
		}
		return t.rawState(typeName, js, redact)
	case kPath:
		return decodePath(data)
	}
	return nil, fmt.Errorf("unknown kind %d", f.kind)
}

// decodePath reads an AttributePath: steps of attribute_name (1), element_key_string (2) and
// element_key_int (3).
func decodePath(b []byte) (Path, error) {
	p := Path{}
	for _, step := range plugin.WireFields(b, 1) {
		n, typ, tl := protowire.ConsumeTag(step)
		if tl < 0 {
			return nil, fmt.Errorf("a path step does not parse")
		}
		switch {
		case typ == protowire.BytesType && n == 1:
			s, _ := protowire.ConsumeBytes(step[tl:])
			p = append(p, string(s))
		case typ == protowire.BytesType && n == 2:
			s, _ := protowire.ConsumeBytes(step[tl:])
			p = append(p, map[string]any{"key": string(s)})
		case typ == protowire.VarintType && n == 3:
			x, _ := protowire.ConsumeVarint(step[tl:])
			p = append(p, int64(x))
		default:
			return nil, fmt.Errorf("a path step of field %d", n)
		}
	}
	return p, nil
}

// pathMsg writes an AttributePath.
func pathMsg(p Path) ([]byte, error) {
	var m []byte
	for _, s := range p {
		var step []byte
		switch s := s.(type) {
		case string:
			step = protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), s)
		case map[string]any:
			k, ok := s["key"].(string)
			if !ok {
				return nil, fmt.Errorf("a path step {\"key\": ...} needs a string key")
			}
			step = protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), k)
		case json.Number, int64, int:
			i, err := asInt(s)
			if err != nil {
				return nil, fmt.Errorf("path step %v is not an integer", s)
			}
			step = protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), uint64(i))
		default:
			return nil, fmt.Errorf("a path step must be a name, a number or {\"key\": ...}, not %s", jsonKind(s))
		}
		m = protowire.AppendBytes(protowire.AppendTag(m, 1, protowire.BytesType), step)
	}
	return m, nil
}

// encodeMsg writes a decoded message back as wire bytes (fields in number order, then "wire").
func encodeMsg(msg Msg, m *message, typeName string, t typer, fill func(Path) (cty.Value, bool)) ([]byte, error) {
	var out []byte
	if m == nil {
		m = emptyAnswer
	}
	if f := m.byName("type_name"); f != nil {
		if s, ok := msg["type_name"].(string); ok {
			typeName = s
		}
	}
	names := make([]string, 0, len(msg))
	for k := range msg {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "wire" {
			continue
		}
		f := m.byName(name)
		if f == nil {
			return nil, fmt.Errorf("field %q is not one the recording format knows here", name)
		}
		vals := []any{msg[name]}
		if f.repeated {
			l, ok := msg[name].([]any)
			if !ok {
				return nil, fmt.Errorf("%s: want an array", name)
			}
			vals = l
		}
		for i, v := range vals {
			var err error
			if out, err = appendField(out, f, v, typeName, i, t, fill); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if w, ok := msg["wire"]; ok {
		b, err := asBytes(w)
		if err != nil {
			return nil, fmt.Errorf("wire: %w", err)
		}
		out = append(out, b...)
	}
	return out, nil
}

func asBytes(v any) ([]byte, error) {
	switch v := v.(type) {
	case []byte:
		return v, nil
	case string:
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("not base64: %v", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("want base64 text, have %s", jsonKind(v))
}

func appendField(out []byte, f *field, v any, typeName string, index int, t typer, fill func(Path) (cty.Value, bool)) ([]byte, error) {
	switch f.kind {
	case kBool:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want true or false, have %s", jsonKind(v))
		}
		x := uint64(0)
		if b {
			x = 1
		}
		return protowire.AppendVarint(protowire.AppendTag(out, f.num, protowire.VarintType), x), nil
	case kInt:
		x, err := asInt(v)
		if err != nil {
			return nil, err
		}
		return protowire.AppendVarint(protowire.AppendTag(out, f.num, protowire.VarintType), uint64(x)), nil
	}
	var data []byte
	switch f.kind {
	case kString:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("want a string, have %s", jsonKind(v))
		}
		data = []byte(s)
	case kBytes:
		b, err := asBytes(v)
		if err != nil {
			return nil, err
		}
		data = b
	case kMessage:
		sub, err := asMsg(v)
		if err != nil {
			return nil, err
		}
		if data, err = encodeMsg(sub, f.sub, typeName, t, fill); err != nil {
			return nil, err
		}
	case kValue:
		rv, err := asValue(v)
		if err != nil {
			return nil, err
		}
		if data, err = t.encodeValue(f.role, typeName, index, rv, fill); err != nil {
			return nil, err
		}
	case kRawState:
		m, err := asMsg(v)
		if err != nil {
			return nil, err
		}
		if w, ok := m["wire"]; ok {
			if data, err = asBytes(w); err != nil {
				return nil, err
			}
			break
		}
		if _, err := asPaths(m["redacted"]); err != nil {
			return nil, fmt.Errorf("redacted: %w", err)
		}
		js, err := json.Marshal(m["json"])
		if err != nil {
			return nil, err
		}
		data = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), js)
	case kPath:
		p, err := asPath(v)
		if err != nil {
			return nil, err
		}
		if data, err = pathMsg(p); err != nil {
			return nil, err
		}
	}
	return protowire.AppendBytes(protowire.AppendTag(out, f.num, protowire.BytesType), data), nil
}

func asInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case json.Number:
		return v.Int64()
	}
	return 0, fmt.Errorf("want an integer, have %s", jsonKind(v))
}

func asMsg(v any) (Msg, error) {
	switch v := v.(type) {
	case Msg:
		return v, nil
	case map[string]any:
		return Msg(v), nil
	}
	return nil, fmt.Errorf("want an object, have %s", jsonKind(v))
}

func asPath(v any) (Path, error) {
	switch v := v.(type) {
	case Path:
		return v, nil
	case []any:
		return Path(v), checkPathLen(len(v))
	}
	return nil, fmt.Errorf("want a path (an array), have %s", jsonKind(v))
}

// asValue reads a recorded value: a *Value, or its JSON object.
func asValue(v any) (*Value, error) {
	switch v := v.(type) {
	case *Value:
		return v, nil
	case map[string]any:
		for k := range v {
			if k != "value" && k != "unknown" && k != "redacted" && k != "wire" {
				return nil, fmt.Errorf("a value has %q; it holds value, unknown, redacted or wire", k)
			}
		}
		rv := &Value{Value: v["value"]}
		var err error
		if rv.Unknown, err = asPaths(v["unknown"]); err != nil {
			return nil, fmt.Errorf("unknown: %w", err)
		}
		if rv.Redacted, err = asPaths(v["redacted"]); err != nil {
			return nil, fmt.Errorf("redacted: %w", err)
		}
		if w, ok := v["wire"]; ok {
			if rv.Wire, err = asBytes(w); err != nil {
				return nil, fmt.Errorf("wire: %w", err)
			}
		}
		return rv, nil
	}
	return nil, fmt.Errorf("want a value object, have %s", jsonKind(v))
}

func asPaths(v any) ([]Path, error) {
	if v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array of paths, have %s", jsonKind(v))
	}
	var out []Path
	for _, e := range l {
		p, err := asPath(e)
		if err != nil {
			return nil, err
		}
		for _, s := range p {
			switch s.(type) {
			case string, json.Number:
			default:
				return nil, fmt.Errorf("a path step must be a name or a number, not %s", jsonKind(s))
			}
		}
		out = append(out, normalPath(p))
	}
	return out, nil
}

// normalPath makes numbers in a path read from JSON the ints a decoded one holds.
func normalPath(p Path) Path {
	out := make(Path, len(p))
	for i, s := range p {
		if n, ok := s.(json.Number); ok {
			if x, err := n.Int64(); err == nil {
				out[i] = int(x)
				continue
			}
		}
		out[i] = s
	}
	return out
}
