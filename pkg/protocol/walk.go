package protocol

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// maxWalkDepth bounds how deep Unmodelled follows messages inside messages (protobuf's own
// recursion limit): a schema's nested blocks are the deepest the protocol has.
const maxWalkDepth = 100

// Unmodelled walks wire, the bytes of message name of v, by the model's tables and lists every
// field in it the model lacks, as "Message.number": a number the message does not have, or a
// field whose wire type is not its type's. It follows every field whose type is a message of the
// model, and each map entry (a message of key 1 and value 2). A message the model takes from
// elsewhere (a Timestamp) is not followed. An error says the bytes do not parse.
func (v *Version) Unmodelled(name string, wire []byte) ([]string, error) {
	var out []string
	err := v.walk(name, wire, 0, &out)
	return out, err
}

func (v *Version) walk(name string, b []byte, depth int, out *[]string) error {
	if depth > maxWalkDepth {
		return fmt.Errorf("messages nest deeper than %d levels", maxWalkDepth)
	}
	m := v.Message(name)
	if m == nil {
		return fmt.Errorf("message %s is not in the model", name)
	}
	for len(b) > 0 {
		n, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return fmt.Errorf("%s does not parse: %v", name, protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(n, typ, b[tl:])
		if vl < 0 {
			return fmt.Errorf("%s field %d does not parse: %v", name, n, protowire.ParseError(vl))
		}
		val := b[tl : tl+vl]
		b = b[tl+vl:]
		f := m.Field(n)
		if f == nil {
			*out = append(*out, fmt.Sprintf("%s.%d", name, n))
			continue
		}
		if f.Map {
			if typ != protowire.BytesType {
				*out = append(*out, fmt.Sprintf("%s.%d", name, n))
				continue
			}
			entry, _ := protowire.ConsumeBytes(val)
			if err := v.walkEntry(name+"."+f.Name, f.Type, entry, depth+1, out); err != nil {
				return err
			}
			continue
		}
		if err := v.walkValue(name, f.Name, n, f.Type, f.Repeated, typ, val, depth, out); err != nil {
			return err
		}
	}
	return nil
}

// walkEntry walks one entry of a map field (where, its message and field): key 1, a string, and
// value 2, of type vt.
func (v *Version) walkEntry(where, vt string, b []byte, depth int, out *[]string) error {
	for len(b) > 0 {
		n, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return fmt.Errorf("an entry of %s does not parse: %v", where, protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(n, typ, b[tl:])
		if vl < 0 {
			return fmt.Errorf("an entry of %s does not parse: %v", where, protowire.ParseError(vl))
		}
		val := b[tl : tl+vl]
		b = b[tl+vl:]
		switch n {
		case 1:
			if typ != protowire.BytesType {
				*out = append(*out, fmt.Sprintf("%s.key", where))
			}
		case 2:
			if err := v.walkValue(where, "value", n, vt, false, typ, val, depth, out); err != nil {
				return err
			}
		default:
			*out = append(*out, fmt.Sprintf("%s.entry.%d", where, n))
		}
	}
	return nil
}

// walkValue checks one field's value (val, with its tag consumed) against its type t, and follows
// it when t is a message of the model.
func (v *Version) walkValue(msg, fname string, n protowire.Number, t string, repeated bool, typ protowire.Type, val []byte, depth int, out *[]string) error {
	bad := func() { *out = append(*out, fmt.Sprintf("%s.%d", msg, n)) }
	switch t {
	case "string", "bytes":
		if typ != protowire.BytesType {
			bad()
		}
	case "bool", "int64", "int32", "uint64", "uint32", "enum":
		// A repeated number may come packed, as bytes.
		if typ != protowire.VarintType && (!repeated || typ != protowire.BytesType) {
			bad()
		}
	default:
		if typ != protowire.BytesType {
			bad()
			return nil
		}
		if v.Message(t) == nil {
			return nil // a message from elsewhere (a Timestamp): not the model's to describe
		}
		sub, _ := protowire.ConsumeBytes(val)
		if err := v.walk(t, sub, depth+1, out); err != nil {
			return fmt.Errorf("%s.%s: %w", msg, fname, err)
		}
	}
	return nil
}
