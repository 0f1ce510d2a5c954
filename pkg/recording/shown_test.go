package recording

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// The server capabilities a provider's schema answer gives (the plugin framework sets some) are
// shown in the provider line and compared with schema_wire: a line that shows them is read, one
// that hides, adds or changes one is refused.
func TestServerCapabilitiesAreShown(t *testing.T) {
	caps := &tfplugin6.GetProviderSchema_Response{ServerCapabilities: &tfplugin6.ServerCapabilities{PlanDestroy: true, MoveResourceState: true}}
	pl := attackSchemaWire(t, caps, nil)
	var l map[string]any
	if err := json.Unmarshal([]byte(pl), &l); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		shown any
		ok    bool
	}{
		{"shown", map[string]any{"plan_destroy": true, "move_resource_state": true}, true},
		{"hidden", nil, false},
		{"one missing", map[string]any{"plan_destroy": true}, false},
		{"one added", map[string]any{"plan_destroy": true, "move_resource_state": true, "generate_resource_config": true}, false},
		{"listed as false", map[string]any{"plan_destroy": true, "move_resource_state": true, "generate_resource_config": false}, false},
	} {
		if tc.shown == nil {
			delete(l, "server_capabilities")
		} else {
			l["server_capabilities"] = tc.shown
		}
		b, _ := json.Marshal(l)
		_, err := Read(strings.NewReader(header+"\n"+string(b)+"\n"), "rec.jsonl", Limits{})
		if (err == nil) != tc.ok {
			t.Errorf("%s: read gives %v", tc.name, err)
		}
	}
}

// A GetFunctions answer is decoded by the model, each map entry as {key, value}, and replay
// answers the same signatures; a field the model lacks inside one is listed by number only.
func TestGetFunctionsEntriesDecodeByTheModel(t *testing.T) {
	field := func(b []byte, n protowire.Number, v string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, n, protowire.BytesType), v)
	}
	// Function echo: parameters [{name s, type "string"}], return {type "string"}, summary.
	fn := field(field(nil, 1, string(field(field(nil, 1, "s"), 2, `"string"`))), 3, string(field(nil, 1, `"string"`)))
	fn = field(fn, 4, "echoes")
	resp := field(nil, 1, string(field(field(nil, 1, "echo"), 2, string(fn))))
	sch, err := newSchemas(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	lb, _ := json.Marshal(r.line("GetFunctions", nil, resp, nil))
	if !strings.Contains(string(lb), `"functions":[{"key":"echo","value":{"parameters":[{"name":"s","type":"InN0cmluZyI="}]`) {
		t.Errorf("the functions are not decoded as entries of the model: %s", lb)
	}
	rec, err := Read(strings.NewReader(header+"\n"+providerLine(t)+"\n"+string(lb)+"\n"), "rec.jsonl", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rec.Replayers(nil)[0].Answer(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/GetFunctions", Protocol: 6})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, resp) {
		t.Errorf("replay answers %x, want the provider's %x", got, resp)
	}

	hidden := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "f")
	hidden = protowire.AppendBytes(protowire.AppendTag(hidden, 2, protowire.BytesType), protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "HIDDEN"))
	resp = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), hidden)
	lb, _ = json.Marshal(r.line("GetFunctions", nil, resp, nil))
	if bytes.Contains(lb, []byte("HIDDEN")) || !strings.Contains(string(lb), `"value":{"unmodelled":[99]}`) {
		t.Errorf("a field the model lacks in a function is not listed by number only: %s", lb)
	}
}

// An identity is decoded by the model: its DynamicValue's bytes, public by the protocol, are
// recorded and answered again, and a field the model lacks is listed by number only.
func TestIdentityDecodesByTheModel(t *testing.T) {
	sch, err := newSchemas(secretsSchema())
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	dv := dynamicOf(t, cty.Object(map[string]cty.Type{"id": cty.String}), cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("i-1")}))
	identity := bytesField(nil, "ResourceIdentityData", "identity_data", dv)
	const m = "ApplyResourceChange"
	l := r.line(m, stringField(nil, m+".Request", "type_name", "x_thing"), bytesField(nil, m+".Response", "new_identity", identity), nil)
	id, ok := l.Response["new_identity"].(Msg)
	if !ok {
		t.Fatalf("new_identity is not a message: %#v", l.Response["new_identity"])
	}
	data, ok := id["identity_data"].(Msg)
	if !ok || !bytes.Equal(data["msgpack"].([]byte), plugin.WireField(dv, dynamicMsgpack)) {
		t.Errorf("identity_data is not its DynamicValue's fields: %#v", id)
	}
	enc, err := encodeMsg(l.Response, callSpecs()[m].response, "x_thing", sch, nil)
	if err != nil || !bytes.Equal(enc, bytesField(nil, m+".Response", "new_identity", identity)) {
		t.Errorf("the identity is answered as %x (%v), want the provider's %x", enc, err, identity)
	}
}

// A schema answer holding what the line's schema has no place for (a list resource's, a state
// store's or an action's schema, provider_meta, a function parameter allowing unknown values) is
// refused: replay would send tofu what no reviewer reads.
func TestSchemaPartsTheLineCannotShowAreRefused(t *testing.T) {
	entry := func(key string, value []byte) []byte {
		e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), key)
		return protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), value)
	}
	block := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), nil) // Schema{block: {}}
	param := protowire.AppendVarint(protowire.AppendTag(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "s"), 4, protowire.VarintType), 1)
	fn := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), param)
	// An empty provider_meta (what SDKs send when a provider declares none) shows nothing: read.
	if _, err := Read(strings.NewReader(header+"\n"+attackSchemaWire(t, nil, protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), block))+"\n"), "rec.jsonl", Limits{}); err != nil {
		t.Errorf("an empty provider_meta: %v", err)
	}
	for name, extra := range map[string][]byte{
		"a list resource's schema": protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), entry("x_list", block)),
		"an action's schema":       protowire.AppendBytes(protowire.AppendTag(nil, 11, protowire.BytesType), entry("x_act", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), block))),
		"provider_meta": protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType),
			protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), // Schema{block: {attributes: [{name: m}]}}
				protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "m")))),
		"a parameter allowing unknowns": protowire.AppendBytes(protowire.AppendTag(nil, 7, protowire.BytesType), entry("f", fn)),
	} {
		pl := attackSchemaWire(t, nil, extra)
		if _, err := Read(strings.NewReader(header+"\n"+pl+"\n"), "rec.jsonl", Limits{}); err == nil || !strings.Contains(err.Error(), "cannot show") {
			t.Errorf("%s in schema_wire: read gives %v", name, err)
		}
	}
}
