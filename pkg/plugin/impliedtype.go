package plugin

import (
	"fmt"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// ImpliedType is the object type the block describes, as tofu encodes its values. It follows
// tofu's configschema rules: a list or map of nested blocks whose element type holds a dynamic
// type anywhere is itself dynamic (a tuple or an object on the wire, each value carrying its
// type), since its elements may differ in type. A nil block is the empty object.
func (b *Block) ImpliedType() (cty.Type, error) {
	if b == nil {
		return cty.EmptyObject, nil
	}
	attrs := map[string]cty.Type{}
	for name, a := range b.Attributes {
		t, err := a.impliedType()
		if err != nil {
			return cty.NilType, fmt.Errorf("attribute %s: %w", name, err)
		}
		attrs[name] = t
	}
	for name, nb := range b.BlockTypes {
		t, err := nb.Block.ImpliedType()
		if err != nil {
			return cty.NilType, fmt.Errorf("block %s: %w", name, err)
		}
		if (nb.NestingMode == "list" || nb.NestingMode == "map") && t.HasDynamicTypes() {
			attrs[name] = cty.DynamicPseudoType
			continue
		}
		attrs[name] = collection(nb.NestingMode, t)
	}
	return cty.Object(attrs), nil
}

// impliedType is the attribute's type: its own, or its nested attributes' object held by the
// nesting mode.
func (a *Attribute) impliedType() (cty.Type, error) {
	if a.NestedType == nil {
		return ctyjson.UnmarshalType(a.Type)
	}
	t, err := (&Block{Attributes: a.NestedType.Attributes}).ImpliedType()
	if err != nil {
		return cty.NilType, err
	}
	return collection(a.NestedType.NestingMode, t), nil
}

// collection wraps an element type the way a nesting mode holds it.
func collection(mode string, t cty.Type) cty.Type {
	switch mode {
	case "list":
		return cty.List(t)
	case "set":
		return cty.Set(t)
	case "map":
		return cty.Map(t)
	}
	return t // single, group
}
