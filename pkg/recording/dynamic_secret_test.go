package recording

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/pkg/plugin"
)

// stackBlock is a resource with a list of blocks that hold a dynamic attribute and a sensitive
// one: tofu then sends the whole list as a dynamic value (a tuple when the elements' dynamic
// parts differ in type), so the sensitive attribute lies inside a dynamic part.
var stackBlock = &plugin.Block{
	Attributes: map[string]*plugin.Attribute{"name": {Type: json.RawMessage(`"string"`), Required: true}},
	BlockTypes: map[string]*plugin.NestedBlock{"layer": {NestingMode: "list", Block: &plugin.Block{Attributes: map[string]*plugin.Attribute{
		"name":   {Type: json.RawMessage(`"string"`), Required: true},
		"secret": {Type: json.RawMessage(`"string"`), Optional: true, Sensitive: true},
		"extra":  {Type: json.RawMessage(`"dynamic"`), Optional: true},
	}}}},
}

// A sensitive attribute inside a dynamic-typed block is redacted like any other (it was written
// in the clear: the walk stopped applying the schema at the dynamic part).
func TestSecretInADynamicTypedBlockIsRedacted(t *testing.T) {
	ty, err := stackBlock.ImpliedType()
	if err != nil {
		t.Fatal(err)
	}
	if ty.AttributeType("layer") != cty.DynamicPseudoType {
		t.Fatalf("the layer blocks' type is %#v, want dynamic", ty.AttributeType("layer"))
	}
	v := cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("s"), "layer": cty.TupleVal([]cty.Value{
		cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("base"), "secret": cty.StringVal("hunter-1"), "extra": cty.StringVal("plain")}),
		cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("top"), "secret": cty.StringVal("hunter-2"),
			"extra": cty.ObjectVal(map[string]cty.Value{"depth": cty.NumberIntVal(2)})}),
	})})
	rv, err := fromCty(v, ty, func(p Path) bool { return secret(stackBlock, p) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rv)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter") || !strings.Contains(string(b), `"base"`) || !strings.Contains(string(b), `"depth":2`) {
		t.Fatalf("the recorded value: %s", b)
	}
	if want := `[["layer","value",0,"secret"],["layer","value",1,"secret"]]`; !strings.Contains(string(b), want) {
		t.Errorf("the redacted places: %s, want %s", b, want)
	}
}

// Replay fills a redacted place inside a dynamic part from the live request: the recorded path's
// wrapper step is followed through the schema's type.
func TestRedactedInADynamicPartIsFilledFromTheRequest(t *testing.T) {
	ty, err := stackBlock.ImpliedType()
	if err != nil {
		t.Fatal(err)
	}
	v := cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("s"), "layer": cty.TupleVal([]cty.Value{
		cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("base"), "secret": cty.StringVal("hunter-1"), "extra": cty.StringVal("plain")}),
		cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("top"), "secret": cty.StringVal("hunter-2"),
			"extra": cty.ObjectVal(map[string]cty.Value{"depth": cty.NumberIntVal(2)})}),
	})})
	rv, err := fromCty(v, ty, func(p Path) bool { return secret(stackBlock, p) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rv.toCty(ty, func(p Path) (cty.Value, bool) { return ctyAt(v, ty, p) })
	if err != nil {
		t.Fatal(err)
	}
	if !got.RawEquals(v) {
		t.Errorf("filled from the request:\n got %#v\nwant %#v", got, v)
	}
	for _, p := range []Path{{"layer", 0, "secret"}, {"layer", "value", 0, "nope"}, {"name", "value"}} {
		if x, ok := ctyAt(v, ty, p); ok {
			t.Errorf("ctyAt %v = %#v, want nothing", p, x)
		}
	}
}

// A stored object (UpgradeResourceState's raw state) keeps a dynamic-typed block as
// {"type": ..., "value": ...}: its sensitive attributes are redacted as well.
func TestSecretInADynamicTypedBlockOfAStoredObjectIsRedacted(t *testing.T) {
	b, err := blockOf(stackBlock)
	if err != nil {
		t.Fatal(err)
	}
	s := &schemas{resources: map[string]block{"x_stack": b}}
	stored := `{"name":"s","layer":{"type":["tuple",[["object",{"extra":"string","name":"string","secret":"string"}]]],` +
		`"value":[{"extra":"plain","name":"base","secret":"hunter-1"}]}}`
	rs, err := s.rawState("x_stack", []byte(stored), true)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hunter") || !strings.Contains(string(out), `"base"`) ||
		!strings.Contains(string(out), `"redacted":[["layer","value",0,"secret"]]`) {
		t.Errorf("the recorded stored object: %s", out)
	}
}

// A redacted sensitive dynamic attribute is filled with the live value, whatever its type (it
// was answered as null: tofu then refused the plan, "sensitive planned value does not match
// config value").
func TestRedactedDynamicAttributeIsFilled(t *testing.T) {
	ty := cty.Object(map[string]cty.Type{"blob": cty.DynamicPseudoType})
	live := cty.ObjectVal(map[string]cty.Value{"user": cty.StringVal("ops"), "key": cty.StringVal("hunter")})
	rv := &Value{Value: map[string]any{"blob": redactedText}, Redacted: []Path{{"blob"}}}
	got, err := rv.toCty(ty, func(p Path) (cty.Value, bool) { return live, len(p) == 1 && p[0] == "blob" })
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetAttr("blob").RawEquals(live) {
		t.Errorf("filled: %#v, want %#v", got.GetAttr("blob"), live)
	}
}
