package recording

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// scaleProviderLine declares example.com/x/x with x_thing: name, a computed id, tags, a
// sensitive token and a list of rules whose password is sensitive.
func scaleProviderLine(tb testing.TB) string {
	tb.Helper()
	str := []byte(`"string"`)
	wire, err := proto.Marshal(&tfplugin6.GetProviderSchema_Response{
		Provider: &tfplugin6.Schema{Block: &tfplugin6.Schema_Block{}},
		ResourceSchemas: map[string]*tfplugin6.Schema{"x_thing": {Block: &tfplugin6.Schema_Block{
			Attributes: []*tfplugin6.Schema_Attribute{
				{Name: "name", Type: str, Required: true}, {Name: "id", Type: str, Computed: true},
				{Name: "tags", Type: []byte(`["map","string"]`), Optional: true},
				{Name: "token", Type: str, Optional: true, Sensitive: true}},
			BlockTypes: []*tfplugin6.Schema_NestedBlock{{TypeName: "rule", Nesting: tfplugin6.Schema_NestedBlock_LIST,
				Block: &tfplugin6.Schema_Block{Attributes: []*tfplugin6.Schema_Attribute{
					{Name: "port", Type: []byte(`"number"`), Optional: true},
					{Name: "password", Type: str, Optional: true, Sensitive: true}}}}}}}}})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := plugin.SchemaFromWire(6, wire)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := json.Marshal(Line{Provider: "example.com/x/x", Version: "1.0.0", Protocol: 6, Schema: s, SchemaWire: wire})
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// scaleRecording is an apply of n objects: for each a plan and an apply, then a read of it, as
// tofu makes them. With distinctSecrets, object i's rule i holds the only password, so every
// call has its own set of redacted places.
func scaleRecording(tb testing.TB, n int, distinctSecrets bool) string {
	var b strings.Builder
	b.WriteString(header + "\n" + scaleProviderLine(tb) + "\n")
	for i := range n {
		rules, redacted := `[{"port":443,"password":"(redacted by oprov)"},{"port":80,"password":null}]`, `[["rule",0,"password"],["token"]]`
		if distinctSecrets {
			var rl []string
			for k := 0; k <= i%64; k++ {
				rl = append(rl, `{"port":1,"password":null}`)
			}
			rl[len(rl)-1] = `{"port":1,"password":"(redacted by oprov)"}`
			rules = "[" + strings.Join(rl, ",") + "]"
			redacted = fmt.Sprintf(`[["rule",%d,"password"],["token"]]`, i%64)
		}
		cfg := fmt.Sprintf(`{"value":{"name":"thing-%d","id":null,"tags":{"team":"a","env":"prod","n":"%d"},"token":"(redacted by oprov)","rule":%s},"redacted":%s}`, i, i, rules, redacted)
		planned := strings.Replace(cfg, `"redacted"`, `"unknown":[["id"]],"redacted"`, 1)
		state := strings.Replace(cfg, `"id":null`, fmt.Sprintf(`"id":"id-%d"`, i), 1)
		fmt.Fprintf(&b, `{"provider":"example.com/x/x","call":"PlanResourceChange","type":"x_thing","request":{"type_name":"x_thing","prior_state":{"value":null},"proposed_new_state":%s,"config":%s},"response":{"planned_state":%s}}`+"\n", cfg, cfg, planned)
		fmt.Fprintf(&b, `{"provider":"example.com/x/x","call":"ApplyResourceChange","type":"x_thing","request":{"type_name":"x_thing","prior_state":{"value":null},"planned_state":%s,"config":%s},"response":{"new_state":%s}}`+"\n", planned, cfg, state)
		fmt.Fprintf(&b, `{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing","current_state":%s},"response":{"new_state":%s}}`+"\n", state, state)
	}
	return b.String()
}

// Read and Replayers keep and allocate a small multiple of the recording (a plan, an apply and a
// read of 3000 objects, some 7 MiB).
func TestReadMemoryIsASmallMultipleOfTheFile(t *testing.T) {
	text := scaleRecording(t, 3000, false)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec, err := Read(strings.NewReader(text), "rec.jsonl", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rps := rec.Replayers(nil)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(rps)
	kept := float64(after.HeapAlloc-before.HeapAlloc) / float64(len(text))
	churn := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(text))
	t.Logf("a recording of %.1f MiB: %.1fx the file kept, %.1fx allocated", float64(len(text))/(1<<20), kept, churn)
	// Before: 8.5x kept, 68x allocated (every answer written out in msgpack by Read's check,
	// every recorded request and state through JSON twice more, every key as its JSON).
	if kept > 10 || churn > 45 {
		t.Errorf("reading a recording of %d bytes keeps %.1fx and allocates %.1fx its size; want at most 10x and 45x", len(text), kept, churn)
	}
}

// hostileIndexRecording holds n applied objects whose every state has its own shape (a tag under
// its own key), each a line of constant size. (Before keyed digests, each also had its own set of
// redacted places, which the index then compared with every other's; a live call is now keyed by
// its own digests, so the shapes are what is left to vary.)
func hostileIndexRecording(tb testing.TB, n int) string {
	var b strings.Builder
	b.WriteString(header + "\n" + scaleProviderLine(tb) + "\n")
	for i := range n {
		state := fmt.Sprintf(`{"value":{"name":"thing-%d","id":"id-%d","tags":{"k%d":"v"},"token":null,"rule":[]}}`, i, i, i)
		fmt.Fprintf(&b, `{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing","current_state":%s},"response":{"new_state":%s}}`+"\n", state, state)
	}
	return b.String()
}

// Building the index and answering a call cost the same per call whether the recording holds a
// thousand calls or ten thousand, even when every call has its own redacted places (counted in
// allocations, not time). Before, the index compared each call's redacted places with every
// other's, and a lookup tried each.
func TestIndexIsLinearInTheCalls(t *testing.T) {
	build := map[int]float64{}
	answer := map[int]float64{}
	for _, n := range []int{1000, 10000} {
		rec, err := Read(strings.NewReader(hostileIndexRecording(t, n)), "rec.jsonl", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		build[n] = testing.AllocsPerRun(1, func() { rec.Replayers(nil) }) / float64(n)
		rp := rec.Replayers(nil)[0]
		c := rp.p.Calls[0]
		req, err := encodeMsg(c.Line.Request, callSpecs()["ReadResource"].request, "x_thing", rp.p.schemas, nil)
		if err != nil {
			t.Fatal(err)
		}
		answer[n] = testing.AllocsPerRun(5, func() {
			if _, err := rp.Answer(t.Context(), &plugin.Call{Method: "/tfplugin6.Provider/ReadResource", Protocol: 6, Request: req}); err != nil {
				t.Fatal(err)
			}
		})
		if rp.used[c] != true {
			t.Fatalf("the call at line %d was not the one answered", c.LineNo)
		}
	}
	t.Logf("allocations per call to build: %.0f at 1k calls, %.0f at 10k; per answer: %.0f and %.0f", build[1000], build[10000], answer[1000], answer[10000])
	if build[10000] > 2*build[1000] {
		t.Errorf("building the index costs %.0f allocations a call at 10k calls, %.0f at 1k: not linear", build[10000], build[1000])
	}
	if answer[10000] > 2*answer[1000] {
		t.Errorf("an answer costs %.0f allocations at 10k calls, %.0f at 1k: it grows with the recording", answer[10000], answer[1000])
	}
}
