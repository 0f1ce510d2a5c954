package stdiohost

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

func mustType(t *testing.T, s string) cty.Type {
	t.Helper()
	ty, err := ctyjson.UnmarshalType([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return ty
}

func TestJSONRoundTripExact(t *testing.T) {
	ty := mustType(t, `["object",{"n":"number","tags":["set",["object",{"k":"string","w":"number"}]],"m":["map","bool"],"l":["list","string"]}]`)
	in := `{"l":["a","b"],"m":{"x":true},"n":123456789012345678901234567890.5,"tags":[{"k":"a","w":1e400},{"k":"b","w":-0.1}]}`
	j, err := decodeJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	v, err := fromJSON(j, ty, cty.NilVal, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := cty.ParseNumberVal("123456789012345678901234567890.5")
	if !v.GetAttr("n").RawEquals(want) {
		t.Errorf("n = %s, want %s", v.GetAttr("n").AsBigFloat().Text('f', -1), want.AsBigFloat().Text('f', -1))
	}
	out, err := toJSON(v, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"n":123456789012345678901234567890.5`, `"w":1e+400`, `"w":-0.1`} {
		if !strings.Contains(string(out), s) {
			t.Errorf("%s does not hold %s", out, s)
		}
	}
	j2, _ := decodeJSON(out)
	v2, err := fromJSON(j2, ty, cty.NilVal, nil, false)
	if err != nil || !v2.RawEquals(v) {
		t.Errorf("second round trip: %v, %#v != %#v", err, v2, v)
	}
}

func TestFromJSONKeepsLeftOutAttributes(t *testing.T) {
	ty := mustType(t, `["object",{"a":"string","b":"string","c":"string"}]`)
	keep := cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("ka"), "b": cty.StringVal("kb"), "c": cty.StringVal("kc")})
	j, _ := decodeJSON([]byte(`{"a":"new","b":null}`))
	v, err := fromJSON(j, ty, keep, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if v.GetAttr("a").AsString() != "new" || !v.GetAttr("b").IsNull() || v.GetAttr("c").AsString() != "kc" {
		t.Errorf("got %#v", v)
	}
}

func TestFromJSONErrorsNameThePath(t *testing.T) {
	ty := mustType(t, `["object",{"l":["list",["object",{"x":"number"}]]}]`)
	for in, want := range map[string]string{
		`{"l":[{"x":1},{"x":"nope"}]}`: "l[1].x: want a number",
		`{"zz":1}`:                     "zz: the schema has no such attribute",
		`{"l":{"$unknown":true}}`:      "l: an unknown value",
		`{"l":5}`:                      "l: want an array, got a number",
	} {
		j, _ := decodeJSON([]byte(in))
		_, err := fromJSON(j, ty, cty.NilVal, nil, false)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
}

func TestUnknownsOnlyInHooks(t *testing.T) {
	v := cty.ObjectVal(map[string]cty.Value{"a": cty.UnknownVal(cty.String), "b": cty.StringVal("x")})
	plain, _ := toJSON(v, false)
	hook, _ := toJSON(v, true)
	if string(plain) != `{"a":null,"b":"x"}` || string(hook) != `{"a":{"$unknown":true},"b":"x"}` {
		t.Errorf("plain %s, hook %s", plain, hook)
	}
}

func FuzzFromJSON(f *testing.F) {
	f.Add(`{"n":1.5,"s":["a"],"o":{"k":"v"}}`)
	f.Add(`{"n":"12","s":[],"o":null}`)
	f.Add(`{"n":` + strings.Repeat("9", 5000) + `}`)
	f.Add(`{"n":1e999999999}`)
	f.Add(`{"n":"1e999999999"}`)
	f.Add("{\"n\":1,\"s\":[\"caf\xe9\"]}")
	ty := cty.Object(map[string]cty.Type{"n": cty.Number, "s": cty.Set(cty.String), "o": cty.Map(cty.String)})
	f.Fuzz(func(t *testing.T, in string) {
		j, err := decodeJSON([]byte(in))
		if err != nil {
			return
		}
		v, err := fromJSON(j, ty, cty.NilVal, nil, true)
		if err != nil {
			return
		}
		if _, err := toJSON(v, true); err != nil {
			t.Fatalf("a value read from %q cannot be written: %v", in, err)
		}
	})
}
