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
