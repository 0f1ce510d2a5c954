package hcldiag

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/gocty"
)

// This file decodes HCL bodies into structs tagged as gohcl tags them (`hcl:"name"`,
// `hcl:"name,optional"`, `hcl:"name,block"`, `hcl:"name,label"`, `hcl:",def_range"`), with the
// field types oprov's files use. It is ours rather than gohcl's because importing gohcl links its
// encoder (hclwrite and go-cmp), whose initialisation every oprov command paid at start-up.

var (
	attributeType  = reflect.TypeOf((*hcl.Attribute)(nil))
	expressionType = reflect.TypeOf((*hcl.Expression)(nil)).Elem()
	rangeType      = reflect.TypeOf(hcl.Range{})
)

// field is one tagged struct field.
type field struct {
	name, kind string // kind: "attr", "optional", "block", "label" or "def_range"
	index      int
}

func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		tag, ok := t.Field(i).Tag.Lookup("hcl")
		if !ok {
			continue
		}
		name, kind, _ := strings.Cut(tag, ",")
		if kind == "" {
			kind = "attr"
		}
		out = append(out, field{name: name, kind: kind, index: i})
	}
	return out
}

// decodeBody decodes body into the struct v points at.
func decodeBody(body hcl.Body, v reflect.Value) hcl.Diagnostics {
	fields := fieldsOf(v.Type())
	schema := &hcl.BodySchema{}
	for _, f := range fields {
		switch f.kind {
		case "attr", "optional":
			schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: f.name, Required: f.kind == "attr"})
		case "block":
			et := v.Field(f.index).Type()
			for et.Kind() == reflect.Slice || et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: f.name, LabelNames: labelNames(et)})
		case "label", "def_range":
		default:
			panic(fmt.Sprintf("hcldiag: unsupported field kind %q on %s", f.kind, v.Type()))
		}
	}
	content, diags := body.Content(schema)
	for _, f := range fields {
		fv := v.Field(f.index)
		switch f.kind {
		case "attr", "optional":
			if a, ok := content.Attributes[f.name]; ok {
				diags = append(diags, decodeAttribute(a, fv)...)
			}
		case "block":
			diags = append(diags, decodeBlocks(content.Blocks.OfType(f.name), f.name, body.MissingItemRange(), fv)...)
		}
	}
	return diags
}

func labelNames(t reflect.Type) []string {
	var names []string
	for _, f := range fieldsOf(t) {
		if f.kind == "label" {
			names = append(names, f.name)
		}
	}
	return names
}

// decodeAttribute sets fv from an attribute: the attribute itself, its expression, or its value
// converted to the field's type.
func decodeAttribute(a *hcl.Attribute, fv reflect.Value) hcl.Diagnostics {
	switch {
	case fv.Type() == attributeType:
		fv.Set(reflect.ValueOf(a))
		return nil
	case fv.Type() == expressionType:
		fv.Set(reflect.ValueOf(a.Expr))
		return nil
	}
	val, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return diags
	}
	return append(diags, setValue(val, a.Expr.Range(), fv)...)
}

// setValue converts val to fv's type and stores it; a null leaves the field as it is.
func setValue(val cty.Value, at hcl.Range, fv reflect.Value) hcl.Diagnostics {
	if val.IsNull() {
		return nil
	}
	ty, err := gocty.ImpliedType(fv.Addr().Interface())
	if err == nil {
		val, err = convert.Convert(val, ty)
	}
	if err == nil {
		err = gocty.FromCtyValue(val, fv.Addr().Interface())
	}
	if err != nil {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsuitable value type", Detail: "Unsuitable value: " + err.Error(), Subject: &at}}
	}
	return nil
}

// decodeBlocks stores the blocks of one type in fv: a slice takes any number, a pointer at most
// one, a struct exactly one.
func decodeBlocks(blocks hcl.Blocks, typ string, missing hcl.Range, fv reflect.Value) hcl.Diagnostics {
	var diags hcl.Diagnostics
	t := fv.Type()
	switch {
	case t.Kind() == reflect.Slice:
		out := reflect.MakeSlice(t, len(blocks), len(blocks))
		for i, b := range blocks {
			diags = append(diags, decodeBlock(b, out.Index(i))...)
		}
		fv.Set(out)
		return diags
	case len(blocks) > 1:
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Duplicate " + typ + " block",
			Detail: "Only one " + typ + " block is allowed; another was defined at " + blocks[0].DefRange.String() + ".", Subject: &blocks[1].DefRange}}
	case len(blocks) == 0 && t.Kind() != reflect.Pointer:
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Missing " + typ + " block", Detail: "A " + typ + " block is required.", Subject: &missing}}
	case len(blocks) == 0:
		return nil
	case t.Kind() == reflect.Pointer:
		fv.Set(reflect.New(t.Elem()))
		return decodeBlock(blocks[0], fv.Elem())
	}
	return decodeBlock(blocks[0], fv)
}

// decodeBlock fills one block's struct: its labels, its definition range, and its body.
func decodeBlock(b *hcl.Block, v reflect.Value) hcl.Diagnostics {
	labels := 0
	for _, f := range fieldsOf(v.Type()) {
		switch {
		case f.kind == "label" && labels < len(b.Labels):
			v.Field(f.index).SetString(b.Labels[labels])
			labels++
		case f.kind == "def_range" && v.Field(f.index).Type() == rangeType:
			v.Field(f.index).Set(reflect.ValueOf(b.DefRange))
		}
	}
	return decodeBody(b.Body, v)
}
