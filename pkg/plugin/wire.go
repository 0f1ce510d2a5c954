package plugin

import "google.golang.org/protobuf/encoding/protowire"

// The provider protocol's messages are read field by field where a whole decode would cost
// more than it gives (the middleware's rules, the recording). These are the few readers both
// share.

// WireWalk calls fn for each field of a message, with its number, wire type and the bytes that
// follow its tag. A message that does not parse is walked up to the damage.
func WireWalk(msg []byte, fn func(n protowire.Number, typ protowire.Type, value []byte)) {
	for len(msg) > 0 {
		n, typ, tl := protowire.ConsumeTag(msg)
		if tl < 0 {
			return
		}
		vl := protowire.ConsumeFieldValue(n, typ, msg[tl:])
		if vl < 0 {
			return
		}
		fn(n, typ, msg[tl:])
		msg = msg[tl+vl:]
	}
}

// WireFields gives every occurrence of a length-delimited field of a message, in order.
func WireFields(msg []byte, num protowire.Number) [][]byte {
	var out [][]byte
	WireWalk(msg, func(n protowire.Number, typ protowire.Type, value []byte) {
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(value)
			if v == nil {
				v = []byte{}
			}
			out = append(out, v)
		}
	})
	return out
}

// WireField gives the last occurrence of a length-delimited field (protobuf's rule for a
// singular field): nil when it is absent, an empty slice when it is present and empty.
func WireField(msg []byte, num protowire.Number) []byte {
	all := WireFields(msg, num)
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

// WireFieldOnly gives a singular length-delimited field as WireField does, and whether it occurs
// more than once. A message field that occurs twice is, by protobuf's rule, the merge of its
// occurrences (what the peer reads), not the last one: a reader that judges the field refuses it.
func WireFieldOnly(msg []byte, num protowire.Number) (value []byte, repeated bool) {
	all := WireFields(msg, num)
	if len(all) == 0 {
		return nil, false
	}
	return all[len(all)-1], len(all) > 1
}
