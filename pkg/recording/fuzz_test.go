package recording

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// FuzzRead: whatever a recording holds, Read gives a recording or an error, never a panic; and a
// recording it accepts answers each of its own calls without a panic.
func FuzzRead(f *testing.F) {
	p := fuzzProviderLine(f)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"PlanResourceChange","type":"x_thing","request":{"type_name":"x_thing","prior_state":{"value":null},"proposed_new_state":{"value":{"name":"a","id":null,"tags":{"k":"v"}},"unknown":[["id"]]},"config":{"value":{"name":"a","id":null,"tags":null}}},"response":{"planned_state":{"value":{"name":"a","id":null,"tags":null},"unknown":[["id"]]},"requires_replace":[["name"]]}}`)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"CallFunction","type":"f","request":{"name":"f","arguments":[{"value":{"type":"number","value":1.5}}]},"response":{"result":{"value":"x"}}}`)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"ConfigureProvider","request":{"config":{"value":{"token":"(redacted by oprov)"},"redacted":[["token"]]}},"response":{"diagnostics":[{"severity":1,"summary":"s","attribute":["token",{"key":"k"},3]}]}}`)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"GetMetadata","request":{},"response":{"wire":"CgA="}}`)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing"},"error":{"code":"Unavailable","message":"gone"}}`)
	// The hostile inputs the bounds refuse (bounds.go): each near its bound, for the fuzzer to
	// push past it.
	apply := `{"provider":"example.com/x/x","call":"CallFunction","type":"f","request":{"name":"f","arguments":[{"value":{"type":"number","value":NUM}}]},"response":{"result":{"value":"x"}}}`
	for _, num := range []string{"1e600000000", "1e1000", "-1E-1001", "1" + strings.Repeat("0", 1000)} {
		f.Add(header + "\n" + p + "\n" + strings.Replace(apply, "NUM", num, 1))
	}
	read := `{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing","current_state":{"value":{"name":"a","id":null,"tags":null},"redacted":[PATH]}},"response":{}}`
	for _, n := range []int{maxPathSteps, maxPathSteps + 1} {
		f.Add(header + "\n" + p + "\n" + strings.Replace(read, "PATH", "["+strings.Repeat(`"tags",`, n-1)+`"x"]`, 1))
	}
	for _, n := range []int{maxDepth - 10, maxDepth + 1} {
		f.Add(header + "\n" + p + "\n" + strings.Replace(apply, "NUM", strings.Repeat("[", n)+strings.Repeat("]", n), 1))
	}
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"Read\u001b[2JResource","type":"x\u009bthing","request":{},"response":{"diagnostics":[{"severity":1,"summary":"\u001b]0;t\u0007"}]}}`)
	f.Add(header + "\n" + p + "\n" + strings.Repeat(`{"provider":"example.com/x/x","call":"GetMetadata","request":{},"response":{}}`+"\n", 20))
	f.Fuzz(func(t *testing.T, text string) {
		// Small limits, so that the fuzzer meets them too.
		rec, err := Read(strings.NewReader(text), "fuzz.jsonl", Limits{MaxBytes: 4 << 20, MaxCalls: 16, MaxLine: 1 << 20})
		if err != nil {
			if strings.ContainsAny(err.Error(), "\x1b\x07") {
				t.Fatalf("an error carries a control character: %q", err)
			}
			return
		}
		for _, rp := range rec.Replayers([]Ignore{{Type: "*", Path: Path{"tags"}}}) {
			for _, c := range rp.p.Calls {
				spec, ok := callSpecs()[c.Line.Call]
				var req *message
				if ok {
					req = spec.request
				}
				b, err := encodeMsg(c.Line.Request, req, c.Line.Type, rp.p.schemas, nil)
				if err != nil {
					t.Fatalf("Read accepted line %d, but its request does not encode: %v", c.LineNo, err)
				}
				rp.Answer(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/" + c.Line.Call, Protocol: 6, Request: b})
			}
		}
	})
}

// fuzzProviderLine declares example.com/x/x with a provider token, one resource and one
// function: its schema answer as the provider would send it, and the schema it shows.
func fuzzProviderLine(f *testing.F) string {
	str := []byte(`"string"`)
	wire, err := proto.Marshal(&tfplugin6.GetProviderSchema_Response{
		Provider: &tfplugin6.Schema{Block: &tfplugin6.Schema_Block{Attributes: []*tfplugin6.Schema_Attribute{
			{Name: "token", Type: str, Optional: true, Sensitive: true}}}},
		ResourceSchemas: map[string]*tfplugin6.Schema{"x_thing": {Block: &tfplugin6.Schema_Block{Attributes: []*tfplugin6.Schema_Attribute{
			{Name: "name", Type: str, Required: true}, {Name: "id", Type: str, Computed: true},
			{Name: "tags", Type: []byte(`["map","string"]`), Optional: true}}}}},
		Functions: map[string]*tfplugin6.Function{"f": {Return: &tfplugin6.Function_Return{Type: str},
			Parameters: []*tfplugin6.Function_Parameter{{Type: []byte(`"dynamic"`)}}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	s, err := plugin.SchemaFromWire(6, wire)
	if err != nil {
		f.Fatal(err)
	}
	b, err := json.Marshal(Line{Provider: "example.com/x/x", Version: "1.0.0", Protocol: 6, Schema: s, SchemaWire: wire})
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}
