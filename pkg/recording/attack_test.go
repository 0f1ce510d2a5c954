package recording

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// attackSchemaWire is x_db {name (required), password (optional, sensitive)} as a provider sends
// it; extra is appended to the wire bytes as they are.
func attackSchemaWire(t *testing.T, resp *tfplugin6.GetProviderSchema_Response, extra []byte) string {
	t.Helper()
	if resp == nil {
		resp = &tfplugin6.GetProviderSchema_Response{}
	}
	resp.Provider = &tfplugin6.Schema{Block: &tfplugin6.Schema_Block{}}
	resp.ResourceSchemas = map[string]*tfplugin6.Schema{"x_db": {Block: &tfplugin6.Schema_Block{
		Attributes: []*tfplugin6.Schema_Attribute{
			{Name: "name", Type: []byte(`"string"`), Required: true},
			{Name: "password", Type: []byte(`"string"`), Optional: true, Sensitive: true},
		}}}}
	wire, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	wire = append(wire, extra...)
	s, err := plugin.SchemaFromWire(6, wire)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Line{Provider: "example.com/x/db", Version: "1.0.0", Protocol: 6, Schema: s, SchemaWire: wire})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var attackDBType = cty.Object(map[string]cty.Type{"name": cty.String, "password": cty.String})

func attackDB(name string, pw cty.Value) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(name), "password": pw})
}

// planRequest is PlanResourceChange of x_db creating an object whose config and proposed state
// are v.
func attackPlanRequest(t *testing.T, v cty.Value) []byte {
	const m = "PlanResourceChange.Request"
	req := stringField(nil, m, "type_name", "x_db")
	req = bytesField(req, m, "prior_state", dynamicOf(t, attackDBType, cty.NullVal(attackDBType)))
	req = bytesField(req, m, "proposed_new_state", dynamicOf(t, attackDBType, v))
	return bytesField(req, m, "config", dynamicOf(t, attackDBType, v))
}

// Attack: a replay refusal names how the live call differs from the nearest recorded one, with
// the live value, and the live value is decoded unredacted. Where the recorded sensitive value is
// not redacted (it was unknown when recorded, as a generated password is at plan time, or null),
// the refusal prints the live secret: in the diagnostic tofu shows in the CI log.
func TestAttackReplayRefusalPrintsLiveSecret(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recorded cty.Value
	}{{"recorded unknown", cty.UnknownVal(cty.String)}, {"recorded null", cty.NullVal(cty.String)}} {
		t.Run(tc.name, func(t *testing.T) {
			pl := attackSchemaWire(t, nil, nil)
			var pline Line
			if err := decodeJSON([]byte(pl), &pline); err != nil {
				t.Fatal(err)
			}
			sch, err := newSchemas(pline.Schema)
			if err != nil {
				t.Fatal(err)
			}
			r := &recorder{addr: "example.com/x/db", schemas: sch}
			v := attackDB("main", tc.recorded)
			l := r.line("PlanResourceChange", attackPlanRequest(t, v), bytesField(nil, "PlanResourceChange.Response", "planned_state", dynamicOf(t, attackDBType, v)), nil)
			lb, _ := json.Marshal(l)
			rec, err := Read(strings.NewReader(header+"\n"+pl+"\n"+string(lb)+"\n"), "rec.jsonl", Limits{})
			if err != nil {
				t.Fatal(err)
			}
			rp := rec.Replayers(nil)[0]
			live := attackPlanRequest(t, attackDB("main", cty.StringVal("hunter2-LIVE-SECRET")))
			resp, err := rp.Answer(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/PlanResourceChange", Protocol: 6, Request: live})
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the refusal holds the live secret: %v", err)
			}
			if strings.Contains(string(resp), "hunter2") {
				t.Errorf("the refusal tofu prints holds the live sensitive password:\n%s", resp)
			}
		})
	}
}

// Attack: a provider line holds the schema twice, decoded (schema, which a reviewer reads) and
// raw (schema_wire, which replay sends tofu as it is). Read compares them only as far as oprov's
// subset of the protocol decodes them: a warning diagnostic, and any field the subset lacks
// (server capabilities, function parameters' allow_unknown_values, list/action schemas, ...),
// travel to tofu unseen by a reviewer.
func TestAttackSchemaWireCarriesWhatTheSchemaDoesNotShow(t *testing.T) {
	hidden := &tfplugin6.GetProviderSchema_Response{Diagnostics: []*tfplugin6.Diagnostic{{
		Severity: tfplugin6.Diagnostic_WARNING, Summary: "HIDDEN-from-reviewer \x1b]0;pwned\x07", Detail: "replay is fine, merge it"}}}
	// Field 6 of GetProviderSchema.Response is server_capabilities (not in oprov's subset): plan_destroy = true.
	caps := protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1))
	caps = protowire.AppendBytes(protowire.AppendTag(caps, 99, protowire.BytesType), []byte("HIDDEN-unknown-field"))
	pl := attackSchemaWire(t, hidden, caps)
	if strings.Contains(pl, "HIDDEN") {
		t.Fatal("test setup: the hidden text shows in the line's JSON")
	}
	rec, err := Read(strings.NewReader(header+"\n"+pl+"\n"), "rec.jsonl", Limits{})
	if err != nil {
		return // refused: held
	}
	resp, err := rec.Replayers(nil)[0].Answer(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/GetProviderSchema", Protocol: 6})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(resp), "HIDDEN") || len(plugin.WireFields(resp, 6)) > 0 {
		t.Errorf("replay sends tofu schema bytes the recording's JSON does not show (a warning diagnostic with escapes, server capabilities, an unknown field): %q", resp)
	}
}

// Attack: identity is recorded as its raw protobuf bytes (kBytes), not decoded by the model:
// a field the model lacks inside ResourceIdentityData (a newer protocol's, or a provider's) is
// written whole, in base64, where a reviewer cannot read it and replay answers it byte for byte.
func TestAttackIdentityBytesCarryUnmodelledFields(t *testing.T) {
	ps := secretsSchema()
	sch, err := newSchemas(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	identity := bytesField(nil, "ResourceIdentityData", "identity_data", dynamicOf(t, cty.Object(map[string]cty.Type{"id": cty.String}), cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("i-1")})))
	identity = protowire.AppendBytes(protowire.AppendTag(identity, 99, protowire.BytesType), []byte("S3CRET-identity-unmodelled"))
	const m = "ApplyResourceChange"
	resp := bytesField(nil, m+".Response", "new_identity", identity)
	l := r.line(m, stringField(nil, m+".Request", "type_name", "x_thing"), resp, nil)
	b, _ := json.Marshal(l)
	if leaks(b, "S3CRET-identity-unmodelled") {
		t.Errorf("a field the model lacks, inside an identity, is in the recording (base64): %s", b)
	}
}

// Attack: the provider answers planned_state twice, {msgpack: A} then {json: B}. Protobuf
// merges the two, and tofu reads msgpack A; the recorder keeps only the last occurrence and
// records B. The recording says the provider planned what tofu never saw, and replay answers B.
func TestAttackDuplicateFieldRecordsWhatTofuDidNotRead(t *testing.T) {
	pl := attackSchemaWire(t, nil, nil)
	var pline Line
	if err := decodeJSON([]byte(pl), &pline); err != nil {
		t.Fatal(err)
	}
	sch, err := newSchemas(pline.Schema)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/db", schemas: sch}
	const m = "PlanResourceChange.Response"
	resp := bytesField(nil, m, "planned_state", dynamicOf(t, attackDBType, attackDB("what-tofu-reads", cty.NullVal(cty.String))))
	resp = bytesField(resp, m, "planned_state", stringField(nil, "DynamicValue", "json", `{"name":"what-the-recording-shows","password":null}`))
	// Protobuf's rule: occurrences of an embedded message merge, which is what their
	// concatenation decodes as; tofu's DynamicValue then has msgpack A (and json B).
	var merged []byte
	for _, occ := range plugin.WireFields(resp, num(m, "planned_state")) {
		merged = append(merged, occ...)
	}
	if len(plugin.WireField(merged, num("DynamicValue", "msgpack"))) == 0 {
		t.Fatal("test setup: the merged message has no msgpack")
	}
	l := r.line("PlanResourceChange", attackPlanRequest(t, attackDB("x", cty.NullVal(cty.String))), resp, nil)
	b, _ := json.Marshal(l)
	if !strings.Contains(string(b), "what-tofu-reads") {
		t.Errorf("tofu read planned name \"what-tofu-reads\" (msgpack of the merged message); the recording shows: %s", b)
	}
}

// Tried (expected to hold): a sensitive attribute inside a nested attribute type (protocol 6
// nested_type) of set, map and list nesting, in a data source's state, and a nested block of set
// nesting, is kept out of the recording.
func TestAttackNestedTypeSecretsInSetAndMap(t *testing.T) {
	str := json.RawMessage(`"string"`)
	inner := map[string]*plugin.Attribute{"k": {Type: str, Optional: true}, "secret": {Type: str, Optional: true, Sensitive: true}}
	blk := &plugin.Block{Attributes: map[string]*plugin.Attribute{
		"sset": {Optional: true, NestedType: &plugin.NestedType{NestingMode: "set", Attributes: inner}},
		"smap": {Optional: true, NestedType: &plugin.NestedType{NestingMode: "map", Attributes: inner}},
		"slist": {Optional: true, NestedType: &plugin.NestedType{NestingMode: "list", Attributes: map[string]*plugin.Attribute{
			"deeper": {Optional: true, NestedType: &plugin.NestedType{NestingMode: "map", Attributes: inner}}}}},
	}, BlockTypes: map[string]*plugin.NestedBlock{"bset": {NestingMode: "set", Block: &plugin.Block{Attributes: inner}}}}
	ps := &plugin.ProviderSchema{DataSourceSchemas: map[string]*plugin.Schema{"x_data": {Block: blk}}}
	sch, err := newSchemas(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	obj := func(s string) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"k": cty.StringVal("a"), "secret": cty.StringVal("S3CRET-" + s)})
	}
	v := cty.ObjectVal(map[string]cty.Value{
		"sset":  cty.SetVal([]cty.Value{obj("in-set")}),
		"smap":  cty.MapVal(map[string]cty.Value{"password": obj("in-map")}),
		"slist": cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"deeper": cty.MapVal(map[string]cty.Value{"x": obj("deeper")})})}),
		"bset":  cty.SetVal([]cty.Value{obj("in-block-set")}),
	})
	ty, err := blk.ImpliedType()
	if err != nil {
		t.Fatal(err)
	}
	const m = "ReadDataSource"
	req := bytesField(stringField(nil, m+".Request", "type_name", "x_data"), m+".Request", "config", dynamicOf(t, ty, v))
	resp := bytesField(nil, m+".Response", "state", dynamicOf(t, ty, v))
	b, _ := json.Marshal(r.line(m, req, resp, nil))
	for _, s := range []string{"S3CRET-in-set", "S3CRET-in-map", "S3CRET-deeper", "S3CRET-in-block-set"} {
		if leaks(b, s) {
			t.Errorf("%s is in the recording: %s", s, b)
		}
	}
}

// Attack: a recording line whose JSON holds the same key twice. Go's decoder keeps the last; a
// reviewer reading the diff (or a tool that keeps the first) reads the first. Replay answers the
// value the reviewer did not read.
func TestAttackDuplicateJSONKeysInALine(t *testing.T) {
	line := `{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing","current_state":{"value":{"name":"img-ubuntu"}}},` +
		`"response":{"new_state":{"value":{"name":"img-ubuntu","name":"img-EVIL"}}}}`
	rec, err := Read(strings.NewReader(header+"\n"+providerLine(t)+"\n"+line+"\n"), "rec.jsonl", Limits{})
	if err != nil {
		return // refused: held
	}
	req := stringField(nil, "ReadResource.Request", "type_name", "x_thing")
	req = bytesField(req, "ReadResource.Request", "current_state", dynamicOf(t, cty.Object(map[string]cty.Type{"name": cty.String}), cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("img-ubuntu")})))
	resp, err := rec.Replayers(nil)[0].Answer(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/ReadResource", Protocol: 6, Request: req})
	t.Errorf("a line with a duplicate key was read; replay answers %q (err %v)", resp, err)
}

// Attack: a recorded call error with code "OK": status.Error(codes.OK, ...) is no error, so
// replay answers the call with an empty response (success: for ReadResource, no object) where
// the line shows an error.
func TestAttackRecordedErrorWithCodeOK(t *testing.T) {
	line := `{"provider":"example.com/x/x","call":"GetMetadata","request":{},"error":{"code":"OK","message":"the provider failed"}}`
	rec, err := Read(strings.NewReader(header+"\n"+providerLine(t)+"\n"+line+"\n"), "rec.jsonl", Limits{})
	if err != nil {
		return // refused: held
	}
	resp, err := rec.Replayers(nil)[0].Answer(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/GetMetadata", Protocol: 6})
	if err == nil {
		t.Errorf("a recorded error (code OK) is answered as a success: %q", resp)
	}
}

// Attack: GetFunctions' functions (a map) are recorded as raw protobuf bytes, never checked
// against the provider line's schema: replay hands tofu function signatures a reviewer reads
// only as base64.
func TestAttackGetFunctionsAnswersRawBytes(t *testing.T) {
	entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "HIDDEN_fn")
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), []byte("\x9a\x06\x06HIDDEN"))
	b, _ := json.Marshal(Line{Provider: "example.com/x/x", Call: "GetFunctions", Request: Msg{}, Response: Msg{"functions": []any{entry}}})
	if strings.Contains(string(b), "HIDDEN") {
		t.Fatal("test setup: the hidden text shows in the JSON")
	}
	rec, err := Read(strings.NewReader(header+"\n"+providerLine(t)+"\n"+string(b)+"\n"), "rec.jsonl", Limits{})
	if err != nil {
		return // refused: held
	}
	resp, err := rec.Replayers(nil)[0].Answer(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/GetFunctions", Protocol: 6})
	if err == nil && strings.Contains(string(resp), "HIDDEN") {
		t.Errorf("replay answers GetFunctions with bytes the line's JSON shows only as base64: %q", resp)
	}
}

// Attack: an enum (int32 on the wire) recorded beyond int32. Protobuf reads the low 32 bits, so
// tofu takes severity 4294967297 as 1 (error) while a reviewer reads a severity no diagnostic
// has; Read accepts it and replay sends it back as it is.
func TestAttackOversizedEnumIsAccepted(t *testing.T) {
	line := `{"provider":"example.com/x/x","call":"ValidateResourceConfig","type":"x_thing","request":{"type_name":"x_thing"},` +
		`"response":{"diagnostics":[{"severity":4294967297,"summary":"only a note"}]}}`
	if _, err := Read(strings.NewReader(header+"\n"+providerLine(t)+"\n"+line+"\n"), "rec.jsonl", Limits{}); err == nil {
		t.Errorf("a severity beyond int32 (tofu reads it as 1, an error) is accepted")
	}
}
