package recording

import (
	"context"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/plugin"
)

// FuzzRead: whatever a recording holds, Read gives a recording or an error, never a panic; and a
// recording it accepts answers each of its own calls without a panic.
func FuzzRead(f *testing.F) {
	p := `{"provider":"example.com/x/x","version":"1.0.0","protocol":6,"schema":{"provider":{"version":0,"block":{"attributes":{"token":{"type":"string","optional":true,"sensitive":true}}}},"resource_schemas":{"x_thing":{"version":0,"block":{"attributes":{"name":{"type":"string","required":true},"id":{"type":"string","computed":true},"tags":{"type":["map","string"],"optional":true}}}}},"functions":{"f":{"description":"","return_type":"string","parameters":[{"type":"dynamic"}]}}},"schema_wire":"AA=="}`
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"PlanResourceChange","type":"x_thing","request":{"type_name":"x_thing","prior_state":{"value":null},"proposed_new_state":{"value":{"name":"a","id":null,"tags":{"k":"v"}},"unknown":[["id"]]},"config":{"value":{"name":"a","id":null,"tags":null}}},"response":{"planned_state":{"value":{"name":"a","id":null,"tags":null},"unknown":[["id"]]},"requires_replace":[["name"]]}}`)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"CallFunction","type":"f","request":{"name":"f","arguments":[{"value":{"type":"number","value":1.5}}]},"response":{"result":{"value":"x"}}}`)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"ConfigureProvider","request":{"config":{"value":{"token":"(redacted by oprov)"},"redacted":[["token"]]}},"response":{"diagnostics":[{"severity":1,"summary":"s","attribute":["token",{"key":"k"},3]}]}}`)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"GetMetadata","request":{},"response":{"wire":"CgA="}}`)
	f.Add(header + "\n" + p + "\n" + `{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing"},"error":{"code":"Unavailable","message":"gone"}}`)
	f.Fuzz(func(t *testing.T, text string) {
		rec, err := Read(strings.NewReader(text), "fuzz.jsonl")
		if err != nil {
			return
		}
		for _, rp := range rec.Replayers([]Ignore{{Type: "*", Path: Path{"tags"}}}) {
			for _, c := range rp.p.Calls {
				spec, ok := calls[c.Line.Call]
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
