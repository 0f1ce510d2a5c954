package recording

import (
	"errors"
	"fmt"

	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/pkg/protocol"
)

// errNotRecorded marks an answer a recording holds no faithful copy of (a secret it never keeps,
// or parts oprov does not model): a well-formed recording may hold one, and replay refuses to
// answer with it.
var errNotRecorded = errors.New("not recorded")

type notRecorded struct{ why string }

func (e notRecorded) Error() string { return e.why }
func (e notRecorded) Unwrap() error { return errNotRecorded }

// whollyRedacted is a value none of which is recorded: its place is the whole value.
func whollyRedacted() *Value { return &Value{Value: redactedText, Redacted: []Path{{}}} }

// wholly says whether redacted places include the whole value.
func wholly(ps []Path) bool {
	for _, p := range ps {
		if len(p) == 0 {
			return true
		}
	}
	return false
}

// secretRole is the schema role a wholly secret DynamicValue is read by when it is kept (a
// provider check's own answers, or function results the user chose to keep).
func secretRole(c protocol.Class) role {
	switch c {
	case protocol.FunctionArgument:
		return roleFuncArg
	case protocol.FunctionResult:
		return roleFuncResult
	case protocol.EphemeralResult:
		return roleEphemeral
	}
	return roleNone
}

// secret decodes a field the model says is wholly secret (pkg/protocol's Whole): with redact,
// nothing of it is kept; without (oprov reading a live provider's answer for its own use), its
// value as the schema reads it, or its bytes.
func (s *schemas) secret(f *field, typeName string, index int, data []byte, redact bool) (any, error) {
	if redact && !(f.class == protocol.FunctionResult && s.keepFunctionResults) {
		rv := whollyRedacted()
		if s.key != nil {
			rv.Digests = []string{s.secretDigest(f, typeName, index, data)}
		}
		if r := secretRole(f.class); r != roleNone {
			if b, err := s.blockFor(r, typeName, index); err == nil {
				if v, err := decodeDynamicValue(data, b.ty); err == nil {
					rv.texts = appendTexts(nil, v)
				}
			}
		}
		return rv, nil
	}
	if r := secretRole(f.class); r != roleNone {
		return s.valueOf(r, typeName, index, data, false)
	}
	return data, nil
}

// secretDigest is the digest a wholly secret field is compared by: of its value by the schema's
// type where a schema describes it (so that tofu's and Terraform's encodings of one value agree),
// else of its bytes.
func (s *schemas) secretDigest(f *field, typeName string, index int, data []byte) string {
	if r := secretRole(f.class); r != roleNone {
		if b, err := s.blockFor(r, typeName, index); err == nil {
			if v, err := decodeDynamicValue(data, b.ty); err == nil {
				return s.key.digest(b.ty, v)
			}
		}
	}
	return s.key.digestBytes(data)
}

// encodeSecret writes a wholly secret field of an answer back. Private state that was not recorded
// is answered as none (ok false): tofu hands it back to the provider, which replay stands in for.
// Any other secret that was not recorded cannot be answered.
func (s *schemas) encodeSecret(f *field, typeName string, index int, v any, fill func(Path) (cty.Value, bool)) ([]byte, bool, error) {
	if v == redactedText {
		v = whollyRedacted()
	}
	rv, err := asValue(v)
	if err != nil {
		return nil, false, err
	}
	if !wholly(rv.Redacted) {
		if r := secretRole(f.class); r != roleNone && (f.class != protocol.FunctionResult || s.keepFunctionResults) {
			b, err := s.encodeValue(r, typeName, index, rv, fill)
			return b, err == nil, err
		}
		return nil, false, fmt.Errorf("a %s is recorded only as redacted", f.class)
	}
	switch f.class {
	case protocol.Private:
		return nil, false, nil
	case protocol.FunctionResult:
		return nil, false, notRecorded{"a provider function's result is not recorded unless the recording was made with oprov run --record-function-results (it may hold a secret passed to the function)"}
	case protocol.EphemeralResult:
		return nil, false, notRecorded{"an ephemeral resource's result is never recorded (it is the secret the resource keeps out of state), so replay cannot open it"}
	}
	return nil, false, notRecorded{fmt.Sprintf("a %s is never recorded, so replay cannot answer with it", f.class)}
}
