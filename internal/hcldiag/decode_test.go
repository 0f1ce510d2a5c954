package hcldiag

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

type testFile struct {
	Name    string         `hcl:"name"`
	Tags    []string       `hcl:"tags,optional"`
	Mode    *hcl.Attribute `hcl:"mode,optional"`
	Expr    hcl.Expression `hcl:"expr,optional"`
	Count   *int           `hcl:"count,optional"`
	Rules   []testRule     `hcl:"rule,block"`
	Default *testRule      `hcl:"default,block"`
}

type testRule struct {
	Kind  string    `hcl:"kind,label"`
	Label string    `hcl:"name,label"`
	Keys  []string  `hcl:"keys"`
	At    hcl.Range `hcl:",def_range"`
}

// TestDecode: attributes of each field type, labelled blocks with their ranges, optional blocks.
func TestDecode(t *testing.T) {
	src := `name = "acme"
tags = ["a", "b"]
mode = "warn"
expr = "${x}/y"
count = 3

rule "trust" "one" {
  keys = ["k1"]
}

rule "trust" "two" {
  keys = []
}
`
	var f testFile
	if err := Decode("f.hcl", []byte(src), &f); err != nil {
		t.Fatal(err)
	}
	if f.Name != "acme" || strings.Join(f.Tags, ",") != "a,b" || f.Count == nil || *f.Count != 3 || f.Default != nil {
		t.Errorf("decoded %+v", f)
	}
	if s, err := String(f.Mode); err != nil || s != "warn" || At(f.Mode.Range) != "f.hcl:3" {
		t.Errorf("mode: %q %v at %s", s, err, At(f.Mode.Range))
	}
	if vars := f.Expr.Variables(); len(vars) != 1 || vars[0].RootName() != "x" {
		t.Errorf("expr variables: %v", vars)
	}
	if len(f.Rules) != 2 || f.Rules[1].Kind != "trust" || f.Rules[1].Label != "two" || At(f.Rules[1].At) != "f.hcl:11" || f.Rules[0].Keys[0] != "k1" {
		t.Errorf("rules: %+v", f.Rules)
	}
}

// TestDecodeErrors: each mistake is reported at its file:line.
func TestDecodeErrors(t *testing.T) {
	for src, want := range map[string]string{
		`tags = []`:                               `f.hcl:1: Missing required argument: The argument "name" is required`,
		"name = \"a\"\nother = 1":                 `f.hcl:2: Unsupported argument: An argument named "other" is not expected here.`,
		"name = \"a\"\ntags = {x = 1}":            "f.hcl:2: Unsuitable value type: Unsuitable value: list of string required",
		"name = \"a\"\ncount = \"many\"":          "f.hcl:2: Unsuitable value type: Unsuitable value: a number is required",
		"name = \"a\"\nrule \"x\" {\n keys=[]\n}": `f.hcl:2: Missing name for rule: All rule blocks must have 2 labels (kind, name).`,
		"name = \"a\"\ndefault \"a\" \"b\" {\n keys = []\n}\ndefault \"c\" \"d\" {\n keys = []\n}": "f.hcl:5: Duplicate default block",
	} {
		var f testFile
		err := Decode("f.hcl", []byte(src), &f)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", src, err, want)
		}
	}
}
