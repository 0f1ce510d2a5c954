package protocol

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// bytesOf and varintOf append a field to a copy of b.
func bytesOf(b []byte, n protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(slices.Clone(b), n, protowire.BytesType), v)
}

func varintOf(b []byte, n protowire.Number, x uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(slices.Clone(b), n, protowire.VarintType), x)
}

// Unmodelled follows the model into messages and map entries, and names every field the model
// lacks, or whose wire type is not its type's, wherever it is; what the model describes passes.
func TestUnmodelledWalksTheModel(t *testing.T) {
	attr := varintOf(bytesOf(nil, 1, []byte("name")), 5, 1) // Schema.Attribute: name, required
	block := bytesOf(nil, 2, attr)                          // Schema.Block.attributes
	schema := bytesOf(nil, 2, block)                        // Schema.block
	entry := bytesOf(bytesOf(nil, 1, []byte("x_thing")), 2, schema)
	clean := bytesOf(nil, 2, entry)                      // resource_schemas
	clean = bytesOf(clean, 6, varintOf(nil, 1, 1))       // server_capabilities.plan_destroy
	clean = bytesOf(clean, 1, bytesOf(nil, 2, []byte{})) // provider: an empty block
	for _, major := range []int{5, 6} {
		v := Published(major)
		if got, err := v.Unmodelled("GetProviderSchema.Response", clean); err != nil || len(got) > 0 {
			t.Errorf("protocol %d: a modelled answer gives %v, %v", major, got, err)
		}
		for _, tc := range []struct {
			name string
			wire []byte
			want string
		}{
			{"top level", bytesOf(clean, 99, []byte("x")), "GetProviderSchema.Response.99"},
			{"in a message", bytesOf(clean, 6, varintOf(nil, 77, 1)), "ServerCapabilities.77"},
			{"in a map entry", bytesOf(clean, 2, varintOf(entry, 3, 1)), "GetProviderSchema.Response.resource_schemas.entry.3"},
			{"in a map's value", bytesOf(clean, 2, bytesOf(bytesOf(nil, 1, []byte("y")), 2, bytesOf(schema, 40, nil))), "Schema.40"},
			{"deep in a schema", bytesOf(clean, 2, bytesOf(nil, 2, bytesOf(nil, 2, bytesOf(nil, 2, varintOf(attr, 60, 1))))), "Schema.Attribute.60"},
			{"a wrong wire type", varintOf(clean, 6, 1), "GetProviderSchema.Response.6"},
		} {
			got, err := v.Unmodelled("GetProviderSchema.Response", tc.wire)
			if err != nil || !slices.Contains(got, tc.want) {
				t.Errorf("protocol %d, %s: got %v, %v; want %s listed", major, tc.name, got, err, tc.want)
			}
		}
		if _, err := v.Unmodelled("GetProviderSchema.Response", []byte{0x0a, 0x05}); err == nil {
			t.Errorf("protocol %d: a truncated answer parses", major)
		}
	}
}
