package recording

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

var testType = cty.Object(map[string]cty.Type{
	"name": cty.String, "count": cty.Number, "tags": cty.Map(cty.String), "ids": cty.Set(cty.String),
	"list": cty.List(cty.Bool), "any": cty.DynamicPseudoType, "secret": cty.String, "id": cty.String,
})

// A value goes into a recording and comes back the same: exact numbers, sets, maps, dynamic
// parts and unknowns; a redacted one comes back from the fill.
func TestValueRoundTrip(t *testing.T) {
	big, _ := cty.ParseNumberVal("123456789012345678901234567890.5")
	v := cty.ObjectVal(map[string]cty.Value{
		"name": cty.StringVal("ada"), "count": big, "tags": cty.MapVal(map[string]cty.Value{"a b": cty.StringVal("x")}),
		"ids": cty.SetVal([]cty.Value{cty.StringVal("1"), cty.StringVal("2")}), "list": cty.ListVal([]cty.Value{cty.True, cty.UnknownVal(cty.Bool)}),
		"any": cty.TupleVal([]cty.Value{cty.StringVal("x"), cty.NumberIntVal(2)}), "secret": cty.StringVal("hunter2"), "id": cty.UnknownVal(cty.String),
	})
	rv, err := fromCty(v, testType, func(p Path) bool { return len(p) == 1 && p[0] == "secret" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rv)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), redactedText) {
		t.Fatalf("the secret is in the recording: %s", b)
	}
	var j any
	if err := decodeJSON(b, &j); err != nil {
		t.Fatal(err)
	}
	back, err := asValue(j)
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.toCty(testType, func(p Path) (cty.Value, bool) { return cty.StringVal("hunter2"), true })
	if err != nil {
		t.Fatal(err)
	}
	if !got.RawEquals(v) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got, v)
	}
	if got, _ := back.toCty(testType, nil); got.GetAttr("secret").AsString() != redactedText {
		t.Errorf("a redacted string with nothing to fill it: %#v", got.GetAttr("secret"))
	}
}

func providerLine(t *testing.T) string { return providerLineOf(t, "string") }

// providerLineOf declares example.com/x/x with one resource, x_thing, whose required attribute
// name has the type typ: its schema as the provider would send it, and as tofu prints it.
func providerLineOf(t *testing.T, typ string) string {
	t.Helper()
	wire, err := proto.Marshal(&tfplugin6.GetProviderSchema_Response{
		Provider: &tfplugin6.Schema{Block: &tfplugin6.Schema_Block{}},
		ResourceSchemas: map[string]*tfplugin6.Schema{"x_thing": {Block: &tfplugin6.Schema_Block{
			Attributes: []*tfplugin6.Schema_Attribute{{Name: "name", Type: []byte(`"` + typ + `"`), Required: true}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := plugin.SchemaFromWire(6, wire)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Line{Provider: "example.com/x/x", Version: "1.0.0", Protocol: 6, Schema: s, SchemaWire: wire})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const header = `{"oprov_recording":2,"program":"tofu 1.12.0"}`

// A damaged recording is refused with an error naming the line and the cause.
func TestReadRefusesDamage(t *testing.T) {
	p := providerLine(t)
	good := `{"provider":"example.com/x/x","call":"ReadDataSource","type":"x_thing","request":{"type_name":"x_thing"},"response":{}}`
	apply := `{"provider":"example.com/x/x","call":"ApplyResourceChange","type":"x_thing","request":{"type_name":"x_thing"},"response":{"new_state":{"value":{"name":5}}}}`
	for _, c := range []struct{ name, text, want string }{
		{"empty", "", "is empty"},
		{"not JSON", "hello\n", "line 1: not an oprov recording"},
		{"no header", p + "\n", "line 1: not an oprov recording"},
		{"newer format", `{"oprov_recording":9}` + "\n" + p, "format version 9"},
		{"cut short", header + "\n" + p[:len(p)/2], "line 2: not a JSON object"},
		{"no provider", header + "\n", "holds no provider"},
		{"undeclared provider", header + "\n" + good, "line 2: a call to provider"},
		{"wrong type", header + "\n" + p + "\n" + apply, `line 3: ApplyResourceChange of x_thing: response: new_state: at name: want a string`},
		{"unknown field", header + "\n" + p + "\n" + strings.Replace(good, `"response":{}`, `"response":{"bogus":1}`, 1), `field "bogus"`},
		{"no answer", header + "\n" + p + "\n" + strings.Replace(good, `,"response":{}`, ``, 1), "no response and no error"},
		{"two headers", header + "\n" + header, "line 2: a second header"},
		{"huge number", header + "\n" + providerLineOf(t, "number") + "\n" + strings.Replace(apply, `"name":5`, `"name":1`+strings.Repeat("0", 2_000_000), 1), "2000001 digits"},
		{"bad protocol", header + "\n" + strings.Replace(p, `"protocol":6`, `"protocol":7`, 1), "protocol 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.text), "rec.jsonl", Limits{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Read: %v, want an error with %q", err, c.want)
			}
		})
	}
	if _, err := Read(strings.NewReader(header+"\n"+p+"\n"+good+"\n"), "rec.jsonl", Limits{}); err != nil {
		t.Errorf("a good recording: %v", err)
	}
}
