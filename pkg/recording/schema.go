package recording

import (
	"encoding/json"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// block is a schema block and the type its values have.
type block struct {
	b  *plugin.Block
	ty cty.Type
}

// schemas is one provider's schema as a recording decodes values with it.
type schemas struct {
	provider  block
	resources map[string]block
	data      map[string]block
	ephemeral map[string]block
	functions map[string]*plugin.Function
	// keepConfig keeps the provider configuration's values; otherwise they are redacted.
	keepConfig bool
	// keepFunctionResults keeps what provider functions return; otherwise they are redacted.
	keepFunctionResults bool
	// key digests the redacted values (digest.go).
	key *Key
}

func newSchemas(s *plugin.ProviderSchema) (*schemas, error) {
	out := &schemas{resources: map[string]block{}, data: map[string]block{}, ephemeral: map[string]block{}, functions: map[string]*plugin.Function{}}
	if s == nil {
		return out, nil
	}
	var err error
	if s.Provider != nil {
		if out.provider, err = blockOf(s.Provider.Block); err != nil {
			return nil, fmt.Errorf("the provider's schema: %w", err)
		}
	} else {
		out.provider = block{ty: cty.EmptyObject}
	}
	for name, sc := range s.ResourceSchemas {
		if out.resources[name], err = blockOf(sc.Block); err != nil {
			return nil, fmt.Errorf("resource %s's schema: %w", name, err)
		}
	}
	for name, sc := range s.DataSourceSchemas {
		if out.data[name], err = blockOf(sc.Block); err != nil {
			return nil, fmt.Errorf("data source %s's schema: %w", name, err)
		}
	}
	for name, sc := range s.EphemeralResourceSchemas {
		if out.ephemeral[name], err = blockOf(sc.Block); err != nil {
			return nil, fmt.Errorf("ephemeral resource %s's schema: %w", name, err)
		}
	}
	for name, f := range s.Functions {
		out.functions[name] = f
	}
	return out, nil
}

func blockOf(b *plugin.Block) (block, error) {
	ty, err := b.ImpliedType()
	return block{b: b, ty: ty}, err
}

// secret reports whether the value at p, in a value of block b, is secret by the schema.
func secret(b *plugin.Block, p Path) bool { return b.SecretAt(p) }

// blockFor gives the schema block and type a role names in a call about typeName.
func (s *schemas) blockFor(r role, typeName string, index int) (block, error) {
	switch r {
	case roleProvider:
		return s.provider, nil
	case roleResource:
		if b, ok := s.resources[typeName]; ok {
			return b, nil
		}
		return block{}, fmt.Errorf("resource type %s is not in the provider's schema", typeName)
	case roleData:
		if b, ok := s.data[typeName]; ok {
			return b, nil
		}
		return block{}, fmt.Errorf("data source %s is not in the provider's schema", typeName)
	case roleEphemeral:
		if b, ok := s.ephemeral[typeName]; ok {
			return b, nil
		}
		return block{}, fmt.Errorf("ephemeral resource %s is not in the provider's schema", typeName)
	case roleFuncArg, roleFuncResult:
		f, ok := s.functions[typeName]
		if !ok {
			return block{}, fmt.Errorf("function %s is not in the provider's schema", typeName)
		}
		var raw json.RawMessage
		switch {
		case r == roleFuncResult:
			raw = f.ReturnType
		case index < len(f.Parameters):
			raw = f.Parameters[index].Type
		case f.VariadicParameter != nil:
			raw = f.VariadicParameter.Type
		default:
			return block{}, fmt.Errorf("function %s has no parameter %d", typeName, index+1)
		}
		ty, err := ctyjson.UnmarshalType(raw)
		return block{ty: ty}, err
	}
	return block{}, fmt.Errorf("no schema describes it")
}

// decodeDynamicValue decodes a DynamicValue message as type ty (msgpack, else JSON; none is null).
func decodeDynamicValue(data []byte, ty cty.Type) (cty.Value, error) {
	switch mp, js := plugin.WireField(data, dynamicMsgpack), plugin.WireField(data, dynamicJSON); {
	case len(mp) > 0:
		return ctymsgpack.Unmarshal(mp, ty)
	case len(js) > 0:
		return ctyjson.Unmarshal(js, ty)
	}
	return cty.NullVal(ty), nil
}

// opaque is a value none of which is kept, compared by the digest of its bytes.
func (s *schemas) opaque(data []byte) *Value {
	rv := whollyRedacted()
	if s.key != nil {
		rv.Digests = []string{s.key.digestBytes(data)}
	}
	return rv
}

// valueOf decodes a DynamicValue message. One no schema describes, or that does not decode by
// its schema, is redacted whole: oprov cannot say what in it is secret.
func (s *schemas) valueOf(r role, typeName string, index int, data []byte, redact bool) (*Value, error) {
	b, err := s.blockFor(r, typeName, index)
	if err != nil {
		return s.opaque(data), nil
	}
	v, err := decodeDynamicValue(data, b.ty)
	if err != nil {
		return s.opaque(data), nil
	}
	var sensitive func(Path) bool
	if redact {
		switch {
		case r == roleProvider && !s.keepConfig:
			sensitive = func(p Path) bool { return len(p) == 1 }
		case b.b != nil:
			sensitive = func(p Path) bool { return secret(b.b, p) }
		}
	}
	return fromCty(v, b.ty, sensitive, s.key)
}

// encodeValue writes a recorded value back as a DynamicValue message (msgpack).
func (s *schemas) encodeValue(r role, typeName string, index int, rv *Value, fill func(Path) (cty.Value, bool)) ([]byte, error) {
	if wholly(rv.Redacted) {
		return nil, notRecorded{"the value was not recorded (no schema says what in it is secret, or it did not decode by its schema)"}
	}
	b, err := s.blockFor(r, typeName, index)
	if err != nil {
		return nil, err
	}
	v, err := rv.toCty(b.ty, fill)
	if err != nil {
		return nil, err
	}
	mp, err := ctymsgpack.Marshal(v, b.ty)
	if err != nil {
		return nil, err
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, dynamicMsgpack, protowire.BytesType), mp), nil
}

// rawState reads a stored object's JSON, redacting what the resource's schema marks secret.
func (s *schemas) rawState(typeName string, js []byte, redact bool) (*RawState, error) {
	var j any
	if err := decodeJSON(js, &j); err != nil {
		return nil, fmt.Errorf("the stored object is not JSON: %v", err)
	}
	out := &RawState{JSON: j}
	if b, ok := s.resources[typeName]; ok && redact {
		out.JSON = redactJSON(j, b.ty, nil, func(p Path) bool { return secret(b.b, p) }, &out.Redacted)
		sortPaths(out.Redacted) // one order, whatever the map's
		out.Digests = s.key.digestsOf(j, out.Redacted)
		for _, p := range out.Redacted {
			out.texts = jsonTexts(jsonAt(j, p), out.texts)
		}
	}
	return out, nil
}

// redactJSON replaces every non-null value at a secret path. ty is the schema's type at p (NilType
// where it is not known): where it is dynamic, the stored JSON is {"type": ..., "value": ...},
// and the schema still decides what inside the value is secret, by the path without that step.
func redactJSON(j any, ty cty.Type, p Path, secret func(Path) bool, out *[]Path) any {
	if j == nil {
		return nil
	}
	if len(p) > 0 && secret(p) {
		*out = append(*out, clonePath(p))
		return redactedText
	}
	switch j := j.(type) {
	case map[string]any:
		if _, wrapped := j["value"]; ty == cty.DynamicPseudoType && wrapped {
			at := len(p)
			inner := func(q Path) bool { return secret(append(clonePath(q[:at]), q[at+1:]...)) }
			m := map[string]any{}
			for k, v := range j {
				m[k] = v
			}
			m["value"] = redactJSON(j["value"], cty.NilType, append(p, "value"), inner, out)
			return m
		}
		m := map[string]any{}
		for k, v := range j {
			m[k] = redactJSON(v, stepType(ty, k), append(p, k), secret, out)
		}
		return m
	case []any:
		l := make([]any, len(j))
		for i, v := range j {
			l[i] = redactJSON(v, stepType(ty, i), append(p, i), secret, out)
		}
		return l
	}
	return j
}
