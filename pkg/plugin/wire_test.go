package plugin

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// An absent field and a present empty one differ: a recording keeps a flatmap state only when
// its JSON field is absent, and the middleware reads an empty function error as an error.
func TestWireFieldAbsentAndEmpty(t *testing.T) {
	msg := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg = protowire.AppendBytes(msg, nil)
	msg = protowire.AppendTag(msg, 2, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 7)
	msg = protowire.AppendTag(msg, 3, protowire.BytesType)
	msg = protowire.AppendBytes(msg, []byte("a"))
	msg = protowire.AppendTag(msg, 3, protowire.BytesType)
	msg = protowire.AppendBytes(msg, []byte("b"))
	if f := WireField(msg, 1); f == nil || len(f) != 0 {
		t.Errorf("a present empty field: %v", f)
	}
	if f := WireField(msg, 2); f != nil {
		t.Errorf("a varint read as bytes: %v", f)
	}
	if f := WireField(msg, 4); f != nil {
		t.Errorf("an absent field: %v", f)
	}
	if f := WireField(msg, 3); string(f) != "b" {
		t.Errorf("a repeated singular field gives the last: %q", f)
	}
	if all := WireFields(append(msg, 0xff), 3); len(all) != 2 {
		t.Errorf("a damaged tail: %d fields before it", len(all))
	}
}

// WireFieldOnly tells a field that occurs twice (protobuf merges message occurrences, so the
// last one alone is not what the peer reads) from one that occurs once.
func TestWireFieldOnlyTellsARepeatedOccurrence(t *testing.T) {
	msg := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte("a"))
	if v, rep := WireFieldOnly(msg, 3); string(v) != "a" || rep {
		t.Errorf("one occurrence: %q, repeated %v", v, rep)
	}
	msg = protowire.AppendBytes(protowire.AppendTag(msg, 3, protowire.BytesType), []byte("b"))
	if v, rep := WireFieldOnly(msg, 3); string(v) != "b" || !rep {
		t.Errorf("two occurrences: %q, repeated %v", v, rep)
	}
	if v, rep := WireFieldOnly(msg, 4); v != nil || rep {
		t.Errorf("an absent field: %q, repeated %v", v, rep)
	}
}
