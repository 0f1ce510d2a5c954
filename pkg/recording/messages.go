package recording

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/protocol"
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
	kSecret   // a field the model says is wholly secret: recorded as redactedText, never its bytes
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
	roleEphemeral
)

type field struct {
	num      protowire.Number
	name     string
	kind     kind
	repeated bool
	sub      *message
	role     role
	compared bool // part of what makes two calls the same (format.md: the same call)
	// merges: a singular field of a message type. Protobuf merges its occurrences (what a peer
	// reads is their concatenation decoded), where a scalar's last occurrence wins.
	merges bool
	class  protocol.Class
	int32  bool // an int32 or enum on the wire: a value past 32 bits is not one
}

// message is what a recording knows of a protocol message: the fields the model names. A field
// it does not name is never written: its number is listed under "unmodelled", and replay refuses
// to answer a call whose recorded answer had one.
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

// callSpecs are the RPCs whose messages a recording decodes, by their names in protocols 5 and 6:
// every unary method of the published protocol, derived from pkg/protocol's model (modelled.go).
// A call of any other method is recorded without its payload, and replay refuses to answer it.
var callSpecs = sync.OnceValue(modelCalls)

// call is what a recording knows of one RPC: its request and response.
type call struct{ request, response *message }

var emptyAnswer = &message{}

// diagField is where each decoded RPC's response keeps its diagnostics.
func diagField(rpc string) protowire.Number {
	c, ok := callSpecs()[rpc]
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
	secret(f *field, typeName string, index int, data []byte, redact bool) (any, error)
	encodeSecret(f *field, typeName string, index int, v any, fill func(Path) (cty.Value, bool)) ([]byte, bool, error)
}

// RawState is a stored object as upgrade sees it: its JSON, with the sensitive attributes
// redacted.
type RawState struct {
	JSON     any    `json:"json"`
	Redacted []Path `json:"redacted,omitempty"`
	// Digests are the redacted values' digests, in the order of Redacted (digest.go).
	Digests []string `json:"digests,omitempty"`
	texts   []string // the redacted values' texts (scrub.go)
}

// Msg is a decoded message: its named fields, and under unmodelledKey the numbers of any field
// the model does not name (never their bytes).
type Msg map[string]any

// decodeMsg decodes a message's wire bytes by spec m. typeName is the call's type (a message's
// own type_name field overrides it for its values). With redact, secrets become redactedText. A
// method the model lacks (m nil) gives only {"unmodelled": true}: nothing of its payload.
func decodeMsg(b []byte, m *message, typeName string, t typer, redact bool) (Msg, error) {
	return decodeMsgAt(b, m, typeName, t, redact, 0)
}

// maxMessageDepth bounds how deep protocol messages nest inside each other: the model's deepest
// (a schema's nested blocks aside, which no recorded call carries) is a few levels.
const maxMessageDepth = 32

// maxUnmodelled bounds how many unmodelled field numbers a message lists.
const maxUnmodelled = 16

func decodeMsgAt(b []byte, m *message, typeName string, t typer, redact bool, depth int) (Msg, error) {
	if depth > maxMessageDepth {
		return nil, fmt.Errorf("messages nest deeper than %d levels", maxMessageDepth)
	}
	out := Msg{}
	if m == nil {
		out[unmodelledKey] = true
		return out, nil
	}
	if tn := ownTypeName(b, m); tn != "" {
		typeName = tn
	}
	var unmodelled []any
	index := map[protowire.Number]int{}
	whole := b
	for len(b) > 0 {
		n, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return nil, fmt.Errorf("the message does not parse: %v", protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(n, typ, b[tl:])
		if vl < 0 {
			return nil, fmt.Errorf("field %d does not parse: %v", n, protowire.ParseError(vl))
		}
		val := b[tl : tl+vl]
		b = b[tl+vl:]
		f := m.byNum(n)
		varint := f != nil && (f.kind == kBool || f.kind == kInt)
		if f == nil || varint != (typ == protowire.VarintType) || !varint && typ != protowire.BytesType {
			if len(unmodelled) < maxUnmodelled && !slices.Contains(unmodelled, any(int64(n))) {
				unmodelled = append(unmodelled, int64(n))
			}
			continue
		}
		var v any
		if typ == protowire.VarintType {
			x, _ := protowire.ConsumeVarint(val)
			if f.int32 && int64(x) != int64(int32(x)) {
				// protobuf would read its low 32 bits: not what it says
				if len(unmodelled) < maxUnmodelled && !slices.Contains(unmodelled, any(int64(n))) {
					unmodelled = append(unmodelled, int64(n))
				}
				continue
			}
			if f.kind == kBool {
				v = x != 0
			} else {
				v = int64(x)
			}
		} else {
			data, _ := protowire.ConsumeBytes(val)
			if f.merges {
				if index[n] > 0 {
					continue // decoded whole at its first occurrence
				}
				data = bytes.Join(plugin.WireFields(whole, n), nil)
			}
			var err error
			if v, err = decodeField(f, data, typeName, index[n], t, redact, depth); err != nil {
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
	if len(unmodelled) > 0 {
		out[unmodelledKey] = unmodelled
	}
	return out, nil
}

func ownTypeName(b []byte, m *message) string {
	if m.byName("type_name") == nil && m.byName("name") == nil && m.byName("target_type_name") == nil {
		return ""
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
		if f := m.byNum(n); f != nil && (f.name == "type_name" || f.name == "name" || f.name == "target_type_name") && typ == protowire.BytesType {
			s, _ := protowire.ConsumeBytes(b[tl:])
			tn = string(s)
		}
		b = b[tl+vl:]
	}
	return tn
}

func decodeField(f *field, data []byte, typeName string, index int, t typer, redact bool, depth int) (any, error) {
	switch f.kind {
	case kString:
		return string(data), nil
	case kBytes:
		return data, nil
	case kMessage:
		return decodeMsgAt(data, f.sub, typeName, t, redact, depth+1)
	case kValue:
		return t.valueOf(f.role, typeName, index, data, redact)
	case kRawState:
		js := plugin.WireField(data, rawStateJSON)
		if js == nil || plugin.WireField(data, rawStateFlatmap) != nil {
			// A legacy flatmap state: no schema says what in it is secret, so none of it is kept.
			return &RawState{JSON: redactedText, Redacted: []Path{{}}}, nil
		}
		return t.rawState(typeName, js, redact)
	case kSecret:
		return t.secret(f, typeName, index, data, redact)
	case kPath:
		return decodePath(data)
	}
	return nil, fmt.Errorf("unknown kind %d", f.kind)
}

// decodePath reads an AttributePath: steps of attribute_name (1), element_key_string (2) and
// element_key_int (3).
func decodePath(b []byte) (Path, error) {
	p := Path{}
	for _, step := range plugin.WireFields(b, pathSteps) {
		n, typ, tl := protowire.ConsumeTag(step)
		if tl < 0 {
			return nil, fmt.Errorf("a path step does not parse")
		}
		switch {
		case typ == protowire.BytesType && n == stepAttribute:
			s, _ := protowire.ConsumeBytes(step[tl:])
			p = append(p, string(s))
		case typ == protowire.BytesType && n == stepKeyString:
			s, _ := protowire.ConsumeBytes(step[tl:])
			p = append(p, map[string]any{"key": string(s)})
		case typ == protowire.VarintType && n == stepKeyInt:
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
			step = protowire.AppendString(protowire.AppendTag(nil, stepAttribute, protowire.BytesType), s)
		case map[string]any:
			k, ok := s["key"].(string)
			if !ok {
				return nil, fmt.Errorf("a path step {\"key\": ...} needs a string key")
			}
			step = protowire.AppendString(protowire.AppendTag(nil, stepKeyString, protowire.BytesType), k)
		case json.Number, int64, int:
			i, err := asInt(s)
			if err != nil {
				return nil, fmt.Errorf("path step %v is not an integer", s)
			}
			step = protowire.AppendVarint(protowire.AppendTag(nil, stepKeyInt, protowire.VarintType), uint64(i))
		default:
			return nil, fmt.Errorf("a path step must be a name, a number or {\"key\": ...}, not %s", jsonKind(s))
		}
		m = protowire.AppendBytes(protowire.AppendTag(m, pathSteps, protowire.BytesType), step)
	}
	return m, nil
}

// encodeMsg writes a decoded message back as wire bytes (fields in number order). A message that
// holds raw bytes ("wire", which no recording of this format has: one truth per line) or lists
// fields the model does not name cannot be written: replay has no faithful answer from it.
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
	// A part with no faithful copy (errNotRecorded) does not stop the check of the others: the
	// message is refused only at the end, so a recording's every other field is still checked.
	var missing error
	keep := func(err error) error {
		if errors.Is(err, errNotRecorded) {
			if missing == nil {
				missing = err
			}
			return nil
		}
		return err
	}
	for _, name := range names {
		switch name {
		case "wire":
			return nil, errors.New(`"wire": a recording holds each value once, decoded; raw protocol bytes beside it are refused (was the line edited?)`)
		case unmodelledKey:
			if err := keep(unmodelledError(msg[name])); err != nil {
				return nil, err
			}
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
			b, err := appendField(out, f, v, typeName, i, t, fill)
			if err = keep(err); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if b != nil {
				out = b
			}
		}
	}
	if missing != nil {
		return nil, missing
	}
	return out, nil
}

// unmodelledError says why a message with unmodelled parts has no answer.
func unmodelledError(v any) error {
	if v == true {
		return notRecorded{"the call is of a method oprov does not model (or did not decode as the model says): it was recorded without its payload, and replay does not answer it"}
	}
	l, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%q holds true or a list of field numbers", unmodelledKey)
	}
	for _, n := range l {
		if _, err := asInt(n); err != nil {
			return fmt.Errorf("%q holds true or a list of field numbers", unmodelledKey)
		}
	}
	return notRecorded{fmt.Sprintf("the recorded message held fields oprov does not model (numbers %v): they were not recorded, so replay cannot answer faithfully", v)}
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
	if f.kind == kBool || f.kind == kInt {
		return appendVarintField(out, f, v)
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
	case kSecret:
		var err error
		var ok bool
		if data, ok, err = t.encodeSecret(f, typeName, index, v, fill); err != nil {
			return nil, err
		} else if !ok {
			return out, nil // private state not recorded: answered as none
		}
	case kRawState:
		var err error
		if data, err = encodeRawState(v); err != nil {
			return nil, err
		}
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

// appendVarintField writes a bool or integer field.
func appendVarintField(out []byte, f *field, v any) ([]byte, error) {
	var x uint64
	if f.kind == kBool {
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want true or false, have %s", jsonKind(v))
		}
		if b {
			x = 1
		}
	} else {
		i, err := asInt(v)
		if err != nil {
			return nil, err
		}
		if f.int32 && i != int64(int32(i)) {
			return nil, fmt.Errorf("%d is past the 32 bits of this field (protobuf would read another number)", i)
		}
		x = uint64(i)
	}
	return protowire.AppendVarint(protowire.AppendTag(out, f.num, protowire.VarintType), x), nil
}

// encodeRawState writes a recorded stored state back as a RawState message: its JSON only, and
// only when it was recorded (not redacted whole), its digests well formed.
func encodeRawState(v any) ([]byte, error) {
	m, err := asMsg(v)
	if err != nil {
		return nil, err
	}
	if _, ok := m["wire"]; ok {
		return nil, errors.New(`"wire": a stored state is recorded as JSON only`)
	}
	ps, err := asPaths(m["redacted"])
	if err != nil {
		return nil, fmt.Errorf("redacted: %w", err)
	}
	if wholly(ps) {
		return nil, errors.New("the stored state was not recorded (no schema says what in it is secret)")
	}
	if _, err := checkDigests(m["digests"], len(ps)); err != nil {
		return nil, fmt.Errorf("digests: %w", err)
	}
	js, err := json.Marshal(m["json"])
	if err != nil {
		return nil, err
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, rawStateJSON, protowire.BytesType), js), nil
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
			if k != "value" && k != "unknown" && k != "redacted" && k != "digests" {
				return nil, fmt.Errorf("a value has %q; it holds value, unknown, redacted and digests (raw protocol bytes are never recorded)", k)
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
		if rv.Digests, err = checkDigests(v["digests"], len(rv.Redacted)); err != nil {
			return nil, fmt.Errorf("digests: %w", err)
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
