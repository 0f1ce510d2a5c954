package recording

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/protocol"
)

// secretsSchema is a provider whose every kind of schema holds a secret somewhere: a sensitive
// and a write-only attribute, a sensitive attribute of a nested block, a sensitive dynamic
// attribute, a sensitive provider argument, an ephemeral resource with a sensitive argument, and
// a function.
func secretsSchema() *plugin.ProviderSchema {
	str := json.RawMessage(`"string"`)
	res := &plugin.Block{
		Attributes: map[string]*plugin.Attribute{
			"name": {Type: str, Required: true}, "password": {Type: str, Optional: true, Sensitive: true},
			"wo": {Type: str, Optional: true, WriteOnly: true}, "dyn": {Type: json.RawMessage(`"dynamic"`), Optional: true, Sensitive: true},
		},
		BlockTypes: map[string]*plugin.NestedBlock{"rule": {NestingMode: "list", Block: &plugin.Block{
			Attributes: map[string]*plugin.Attribute{"token": {Type: str, Optional: true, Sensitive: true}, "port": {Type: json.RawMessage(`"number"`), Optional: true}}}}},
	}
	return &plugin.ProviderSchema{
		Provider:                 &plugin.Schema{Block: &plugin.Block{Attributes: map[string]*plugin.Attribute{"api_key": {Type: str, Optional: true, Sensitive: true}}}},
		ResourceSchemas:          map[string]*plugin.Schema{"x_thing": {Block: res}, "x_other": {Block: res}},
		EphemeralResourceSchemas: map[string]*plugin.Schema{"x_token": {Block: &plugin.Block{Attributes: map[string]*plugin.Attribute{"seed": {Type: str, Optional: true, Sensitive: true}, "value": {Type: str, Computed: true}}}}},
		Functions: map[string]*plugin.Function{"echo": {Parameters: []*plugin.Parameter{{Name: "s", Type: str}},
			ReturnType: str}},
	}
}

func num(msg, field string) protowire.Number { return protocol.Num(msg, field) }

func bytesField(b []byte, msg, field string, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num(msg, field), protowire.BytesType), v)
}

func stringField(b []byte, msg, field, v string) []byte { return bytesField(b, msg, field, []byte(v)) }

// dynamic is a DynamicValue holding v (of block b's type) as msgpack.
func dynamic(t *testing.T, b *plugin.Block, v map[string]cty.Value) []byte {
	t.Helper()
	ty, err := b.ImpliedType()
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		if x, ok := v[name]; ok {
			attrs[name] = x
		} else {
			attrs[name] = cty.NullVal(at)
		}
	}
	mp, err := ctymsgpack.Marshal(cty.ObjectVal(attrs), ty)
	if err != nil {
		t.Fatal(err)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, num("DynamicValue", "msgpack"), protowire.BytesType), mp)
}

func dynamicOf(t *testing.T, ty cty.Type, v cty.Value) []byte {
	t.Helper()
	mp, err := ctymsgpack.Marshal(v, ty)
	if err != nil {
		t.Fatal(err)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, num("DynamicValue", "msgpack"), protowire.BytesType), mp)
}

// leaks says where a secret shows in a recording line: as itself, or in base64 (whatever its
// alignment), as undecoded protocol bytes would be written.
func leaks(line []byte, secret string) bool {
	if strings.Contains(string(line), secret) {
		return true
	}
	for pad := 0; pad < 3; pad++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, pad), secret...))
		core := enc[4 : len(enc)-4] // the part that does not depend on neighbours
		if strings.Contains(string(line), core) {
			return true
		}
	}
	return false
}

// Every place a provider call can carry a secret is kept out of a recording: the schema's secret
// attributes (sensitive, write-only, inside a nested block, a dynamic value), the provider's
// configuration, and what oprov cannot know the secrecy of (private state, an ephemeral
// resource's result, a function's arguments and result, a moved object's source, provider_meta, a
// legacy flatmap state), and fields and methods the protocol model does not describe.
func TestRecordingKeepsEverySecretOut(t *testing.T) {
	ps := secretsSchema()
	sch, err := newSchemas(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	res := ps.ResourceSchemas["x_thing"].Block
	ruleTy, _ := res.BlockTypes["rule"].Block.ImpliedType()
	obj := func(tag string) []byte {
		return dynamic(t, res, map[string]cty.Value{"name": cty.StringVal("a"), "password": cty.StringVal("S3CRET-password-" + tag),
			"wo":   cty.StringVal("S3CRET-writeonly-" + tag),
			"dyn":  cty.ObjectVal(map[string]cty.Value{"inner": cty.StringVal("S3CRET-dynamic-" + tag)}),
			"rule": cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"token": cty.StringVal("S3CRET-nested-" + tag), "port": cty.NumberIntVal(1)})}),
		})
	}
	_ = ruleTy
	const plan, apply = "PlanResourceChange", "ApplyResourceChange"
	cases := []struct {
		name, rpc string
		req, resp []byte
		secrets   []string
	}{
		{"resource values", plan,
			bytesField(bytesField(bytesField(bytesField(stringField(nil, plan+".Request", "type_name", "x_thing"), plan+".Request", "prior_state", obj("prior")),
				plan+".Request", "proposed_new_state", obj("proposed")), plan+".Request", "config", obj("config")), plan+".Request", "prior_private", []byte("S3CRET-prior-private")),
			bytesField(bytesField(nil, plan+".Response", "planned_state", obj("planned")), plan+".Response", "planned_private", []byte("S3CRET-planned-private")),
			[]string{"S3CRET-password-", "S3CRET-writeonly-", "S3CRET-dynamic-", "S3CRET-nested-", "S3CRET-prior-private", "S3CRET-planned-private"}},
		{"apply and private", apply,
			bytesField(bytesField(stringField(nil, apply+".Request", "type_name", "x_thing"), apply+".Request", "planned_state", obj("planned")), apply+".Request", "provider_meta",
				dynamicOf(t, cty.Object(map[string]cty.Type{"m": cty.String}), cty.ObjectVal(map[string]cty.Value{"m": cty.StringVal("S3CRET-provider-meta")}))),
			bytesField(bytesField(nil, apply+".Response", "new_state", obj("new")), apply+".Response", "private", []byte("S3CRET-new-private")),
			[]string{"S3CRET-password-", "S3CRET-writeonly-", "S3CRET-provider-meta", "S3CRET-new-private"}},
		{"provider configuration", "ConfigureProvider",
			bytesField(nil, "ConfigureProvider.Request", "config", dynamic(t, ps.Provider.Block, map[string]cty.Value{"api_key": cty.StringVal("S3CRET-api-key")})),
			nil, []string{"S3CRET-api-key"}},
		{"ephemeral resource", "OpenEphemeralResource",
			bytesField(stringField(nil, "OpenEphemeralResource.Request", "type_name", "x_token"), "OpenEphemeralResource.Request", "config",
				dynamic(t, ps.EphemeralResourceSchemas["x_token"].Block, map[string]cty.Value{"seed": cty.StringVal("S3CRET-ephemeral-config")})),
			bytesField(bytesField(nil, "OpenEphemeralResource.Response", "result",
				dynamic(t, ps.EphemeralResourceSchemas["x_token"].Block, map[string]cty.Value{"value": cty.StringVal("S3CRET-ephemeral-result")})),
				"OpenEphemeralResource.Response", "private", []byte("S3CRET-ephemeral-private")),
			[]string{"S3CRET-ephemeral-config", "S3CRET-ephemeral-result", "S3CRET-ephemeral-private"}},
		{"function", "CallFunction",
			bytesField(stringField(nil, "CallFunction.Request", "name", "echo"), "CallFunction.Request", "arguments", dynamicOf(t, cty.String, cty.StringVal("S3CRET-function-argument"))),
			bytesField(nil, "CallFunction.Response", "result", dynamicOf(t, cty.String, cty.StringVal("S3CRET-function-result"))),
			[]string{"S3CRET-function-argument", "S3CRET-function-result"}},
		{"cross-type move", "MoveResourceState",
			bytesField(bytesField(stringField(stringField(nil, "MoveResourceState.Request", "source_type_name", "x_other"), "MoveResourceState.Request", "target_type_name", "x_thing"),
				"MoveResourceState.Request", "source_state", stringField(nil, "RawState", "json", `{"name":"a","password":"S3CRET-moved-source","extra":"S3CRET-moved-unknown-attr"}`)),
				"MoveResourceState.Request", "source_private", []byte("S3CRET-moved-private")),
			bytesField(nil, "MoveResourceState.Response", "target_state", obj("target")),
			[]string{"S3CRET-moved-source", "S3CRET-moved-unknown-attr", "S3CRET-moved-private", "S3CRET-password-"}},
		{"legacy flatmap state", "UpgradeResourceState",
			bytesField(stringField(nil, "UpgradeResourceState.Request", "type_name", "x_thing"), "UpgradeResourceState.Request", "raw_state",
				protowire.AppendBytes(protowire.AppendTag(nil, num("RawState", "flatmap"), protowire.BytesType),
					protowire.AppendString(protowire.AppendTag(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "password"), 2, protowire.BytesType), "S3CRET-flatmap"))),
			nil, []string{"S3CRET-flatmap"}},
		{"a field the model lacks", plan,
			stringField(bytesField(stringField(nil, plan+".Request", "type_name", "x_thing"), plan+".Request", "config", obj("config")), plan+".Request", "type_name", "x_thing"),
			protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), []byte("S3CRET-unmodelled-field")),
			[]string{"S3CRET-unmodelled-field"}},
		{"a method the model lacks", "SomethingNew",
			[]byte("\x0a\x0fS3CRET-future-1"), []byte("\x0a\x0fS3CRET-future-2"), []string{"S3CRET-future-"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := r.line(tc.rpc, tc.req, tc.resp, nil)
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.secrets {
				if leaks(b, s) {
					t.Errorf("%s is in the recording: %s", s, b)
				}
			}
			if strings.Contains(string(b), `"wire"`) {
				t.Errorf("undecoded bytes are in the recording: %s", b)
			}
		})
	}
}

// A recorded value that cannot be known (wholly redacted) is never answered with, and a call
// whose recorded answer lists fields the model lacks is refused by replay, naming why.
func TestReplayRefusesWhatWasNotRecorded(t *testing.T) {
	ps := secretsSchema()
	sch, err := newSchemas(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	eph := r.line("OpenEphemeralResource", stringField(nil, "OpenEphemeralResource.Request", "type_name", "x_token"),
		bytesField(nil, "OpenEphemeralResource.Response", "result", dynamic(t, ps.EphemeralResourceSchemas["x_token"].Block, map[string]cty.Value{"value": cty.StringVal("x")})), nil)
	fn := r.line("CallFunction", stringField(nil, "CallFunction.Request", "name", "echo"), bytesField(nil, "CallFunction.Response", "result", dynamicOf(t, cty.String, cty.StringVal("x"))), nil)
	extra := r.line("ReadDataSource", nil, protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), []byte("x")), nil)
	for _, tc := range []struct {
		l    *Line
		want string
	}{{eph, "ephemeral resource's result is never recorded"}, {fn, "--record-function-results"}, {extra, "fields oprov does not model (numbers [99])"}} {
		b, _ := json.Marshal(tc.l)
		var back Line
		if err := decodeJSON(b, &back); err != nil {
			t.Fatal(err)
		}
		_, err := encodeMsg(back.Response, callSpecs()[back.Call].response, back.Type, sch, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: answering from %s gave %v, want %q", tc.l.Call, b, err, tc.want)
		}
	}
	// Kept on request, a function's result is answered.
	sch.keepFunctionResults = true
	fn = r.line("CallFunction", stringField(nil, "CallFunction.Request", "name", "echo"), bytesField(nil, "CallFunction.Response", "result", dynamicOf(t, cty.String, cty.StringVal("kept"))), nil)
	b, _ := json.Marshal(fn)
	if !strings.Contains(string(b), `"kept"`) {
		t.Fatalf("a kept function result is not in the recording: %s", b)
	}
	var back Line
	if err := decodeJSON(b, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := encodeMsg(back.Response, callSpecs()["CallFunction"].response, "echo", sch, nil); err != nil {
		t.Errorf("a kept function result is not answered: %v", err)
	}
}

// A recording line that holds raw protocol bytes beside (or instead of) the decoded value is
// refused: a reviewer reads the decoded form, so it must be the only one replay can answer with.
func TestRawWireBytesAreRefused(t *testing.T) {
	for _, line := range []string{
		`{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing"},"response":{"new_state":{"value":{"name":"img-ubuntu"},"wire":"CgdpbWctRVZJTA=="}}}`,
		`{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing"},"response":{"wire":"CgdpbWctRVZJTA=="}}`,
	} {
		rec := header + "\n" + providerLine(t) + "\n" + line + "\n"
		_, err := Read(strings.NewReader(rec), "rec.jsonl", Limits{})
		if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "wire") {
			t.Errorf("a line with raw bytes: %v", err)
		}
	}
}

// A provider's answer cannot make the recorder work without bound: a message with many distinct
// fields the model lacks lists a few of them, and messages nested past the bound are refused
// (the line keeps nothing of them).
func TestRecorderBoundsHostileAnswers(t *testing.T) {
	sch, err := newSchemas(secretsSchema())
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	var many []byte
	for n := protowire.Number(100); n < 100+200000; n++ {
		many = protowire.AppendVarint(protowire.AppendTag(many, n, protowire.VarintType), 1)
	}
	allocs := testing.AllocsPerRun(1, func() { r.line("ReadDataSource", nil, many, nil) })
	l := r.line("ReadDataSource", nil, many, nil)
	if u, _ := l.Response[unmodelledKey].([]any); len(u) != maxUnmodelled {
		t.Errorf("listed %d unmodelled fields, want %d", len(u), maxUnmodelled)
	}
	if allocs > 1000 {
		t.Errorf("200000 unmodelled fields took %.0f allocations", allocs)
	}
	// Diagnostics nest an AttributePath; wrap a diagnostic in itself past the bound through the
	// one recursive message reachable: build the deepest nesting the wire allows cheaply.
	deep := []byte{}
	for i := 0; i < 10000; i++ {
		deep = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), deep)
	}
	if _, err := decodeMsgAt(deep, recursiveMsg(), "", sch, true, 0); err == nil || !strings.Contains(err.Error(), "nest deeper") {
		t.Errorf("10000 nested messages: %v", err)
	}
}

// recursiveMsg is a message whose field 1 is itself.
func recursiveMsg() *message {
	m := &message{}
	m.fields = []field{{num: 1, name: "self", kind: kMessage, sub: m}}
	return m
}

// A provider that echoes a secret it was sent (in a diagnostic, a function's error or a call's
// error) does not put it in the recording: the request's secrets are taken out of those texts.
func TestEchoedSecretsStayOutOfDiagnostics(t *testing.T) {
	ps := secretsSchema()
	sch, err := newSchemas(ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	res := ps.ResourceSchemas["x_thing"].Block
	cfg := dynamic(t, res, map[string]cty.Value{"name": cty.StringVal("a"), "password": cty.StringVal("hunter2-ECHOED")})
	req := bytesField(stringField(nil, "ValidateResourceConfig.Request", "type_name", "x_thing"), "ValidateResourceConfig.Request", "config", cfg)
	diag := stringField(stringField(protowire.AppendVarint(protowire.AppendTag(nil, num("Diagnostic", "severity"), protowire.VarintType), 1),
		"Diagnostic", "summary", "bad password hunter2-ECHOED"), "Diagnostic", "detail", "the password hunter2-ECHOED is too short")
	resp := bytesField(nil, "ValidateResourceConfig.Response", "diagnostics", diag)
	fnReq := bytesField(stringField(nil, "CallFunction.Request", "name", "echo"), "CallFunction.Request", "arguments", dynamicOf(t, cty.String, cty.StringVal("arg-ECHOED")))
	fnResp := bytesField(nil, "CallFunction.Response", "error", stringField(nil, "FunctionError", "text", "cannot echo arg-ECHOED"))
	for _, l := range []*Line{r.line("ValidateResourceConfig", req, resp, nil), r.line("CallFunction", fnReq, fnResp, nil),
		r.line("ValidateResourceConfig", req, nil, status.Error(codes.Internal, "crashed on hunter2-ECHOED"))} {
		b, _ := json.Marshal(l)
		if strings.Contains(string(b), "ECHOED") {
			t.Errorf("an echoed secret is in the recording: %s", b)
		}
		if !strings.Contains(string(b), redactedText) {
			t.Errorf("nothing was redacted: %s", b)
		}
	}
}
