package stdiohost

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func testBlock(t *testing.T) *block {
	t.Helper()
	b, err := checkBlock("resource t_x", &wireBlock{Attributes: map[string]*wireAttribute{
		"name": {Type: []byte(`"string"`), Required: true, Replace: true},
		"size": {Type: []byte(`"number"`), Optional: true},
		"zone": {Type: []byte(`"string"`), Optional: true, Computed: true},
		"id":   {Type: []byte(`"string"`), Computed: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func obj(name, zone, id string, size int64) cty.Value {
	s := func(v string) cty.Value {
		if v == "" {
			return cty.NullVal(cty.String)
		}
		return cty.StringVal(v)
	}
	return cty.ObjectVal(map[string]cty.Value{"name": s(name), "size": cty.NumberIntVal(size), "zone": s(zone), "id": s(id)})
}

func TestPlan(t *testing.T) {
	b := testBlock(t)
	null := cty.NullVal(b.ty)
	// create: computed values unknown
	p, rr := plan(b, null, obj("a", "", "", 1), obj("a", "", "", 1))
	if p.GetAttr("id").IsKnown() || p.GetAttr("zone").IsKnown() || len(rr) != 0 {
		t.Errorf("create: %#v %v", p, rr)
	}
	prior := obj("a", "z1", "i1", 1)
	// no change: the prior state is the plan
	if p, _ := plan(b, prior, obj("a", "", "", 1), prior); !p.RawEquals(prior) {
		t.Errorf("no change planned %#v", p)
	}
	// update in place: optional+computed kept (tofu proposes the prior), computed-only unknown
	p, rr = plan(b, prior, obj("a", "", "", 2), obj("a", "z1", "i1", 2))
	if p.GetAttr("zone").AsString() != "z1" || p.GetAttr("id").IsKnown() || len(rr) != 0 {
		t.Errorf("update: %#v %v", p, rr)
	}
	// a replace attribute changed
	_, rr = plan(b, prior, obj("b", "", "", 1), obj("b", "z1", "i1", 1))
	if len(rr) != 1 || rr[0].String() != `AttributeName("name")` {
		t.Errorf("replace paths %v", rr)
	}
	// destroy
	if p, _ := plan(b, prior, null, null); !p.IsNull() {
		t.Errorf("destroy planned %#v", p)
	}
}

func TestCheckSchemaRefusesWhatItCannotPlan(t *testing.T) {
	for _, tc := range []struct {
		w    *wireSchema
		want string
	}{
		{&wireSchema{Resources: map[string]*wireBlock{"other_x": {}}}, "must be named after the provider"},
		{&wireSchema{Resources: map[string]*wireBlock{"t_x": {Attributes: map[string]*wireAttribute{"a": {Type: []byte(`"strang"`), Required: true}}}}}, `attribute "a": type "strang"`},
		{&wireSchema{Resources: map[string]*wireBlock{"t_x": {Attributes: map[string]*wireAttribute{"a": {Type: []byte(`"string"`)}}}}}, "say one of"},
		{nil, "no \"schema\""},
	} {
		if _, err := checkSchema("t", tc.w); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
