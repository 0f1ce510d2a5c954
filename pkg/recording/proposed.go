package recording

import (
	"fmt"

	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/pkg/plugin"
)

// This file builds what tofu sends a provider in a plan, so that a call the driver makes is the
// call tofu made and a recording answers it: the proposed new state (OpenTofu's
// objchange.ProposedNew) and the configuration's shape (an absent nested block is an empty
// collection, as tofu decodes configuration, not null).

// proposedNew is the proposed new state of a PlanResourceChange: the configuration, where a
// computed attribute it leaves null keeps the prior state's value, and nested blocks and nested
// attributes are matched with their prior elements (lists by index, maps by key, sets by the
// values the configuration sets). With no prior state (a create) a computed attribute the
// configuration leaves null stays null: the provider, not tofu, plans it unknown. A delete (no
// configuration) proposes null.
func proposedNew(b block, prior, cfg cty.Value) cty.Value {
	if cfg.IsNull() || b.b == nil {
		return cfg
	}
	return proposedBlock(b.b, prior, cfg)
}

// safeProposedNew is proposedNew, with a value that does not fit its schema (a cty constructor
// panics on elements of differing types) an error rather than a crash.
func safeProposedNew(b block, prior, cfg cty.Value) (v cty.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = cty.NilVal, fmt.Errorf("the proposed new state: the state and configuration do not fit the schema (%v)", r)
		}
	}()
	return proposedNew(b, prior, cfg), nil
}

// proposedBlock proposes a block's new value; a null prior is the block with nothing set.
func proposedBlock(b *plugin.Block, prior, cfg cty.Value) cty.Value {
	if cfg.IsNull() && prior.IsNull() {
		return prior
	}
	if prior.IsNull() {
		prior = emptyBlock(b, prior.Type())
	}
	if cfg.IsNull() || !cfg.IsKnown() {
		return prior
	}
	attrs := proposedAttrs(b.Attributes, prior, cfg)
	for name, nb := range b.BlockTypes {
		attrs[name] = proposedNestedBlock(nb, prior.GetAttr(name), cfg.GetAttr(name))
	}
	return cty.ObjectVal(attrs)
}

// proposedAttrs proposes each attribute: a computed one the configuration leaves null keeps its
// prior value (unless that value shows it came from configuration), a nested one is merged
// element by element, any other is the configuration's.
func proposedAttrs(attrs map[string]*plugin.Attribute, prior, cfg cty.Value) map[string]cty.Value {
	out := make(map[string]cty.Value, len(attrs))
	for name, a := range attrs {
		c := cfg.GetAttr(name)
		var p cty.Value
		switch {
		case prior.IsNull() && prior.Type().IsObjectType():
			p = cty.NullVal(prior.Type().AttributeType(name))
		case prior.IsNull():
			p = cty.NullVal(c.Type())
		default:
			p = prior.GetAttr(name)
		}
		switch {
		case a.Computed && c.IsNull():
			out[name] = p
			if a.Optional && a.NestedType != nil && setByConfig(a.NestedType, p) {
				out[name] = c
			}
		case a.NestedType != nil:
			out[name] = proposedNestedAttr(a.NestedType, p, c)
		default:
			out[name] = c
		}
	}
	return out
}

// setByConfig reports whether a nested attribute's prior value holds a non-null value of an
// attribute that is not computed: only configuration could have set it.
func setByConfig(nt *plugin.NestedType, v cty.Value) bool {
	for _, obj := range elements(nt.NestingMode, v) {
		if obj.IsNull() || !obj.IsKnown() {
			continue
		}
		for name, a := range nt.Attributes {
			av := obj.GetAttr(name)
			if av.IsNull() {
				continue
			}
			if !a.Computed || a.NestedType != nil && setByConfig(a.NestedType, av) {
				return true
			}
		}
	}
	return false
}

// elements are the objects a nested value holds in its nesting mode.
func elements(mode string, v cty.Value) []cty.Value {
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	switch mode {
	case "list", "set", "map":
		var out []cty.Value
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, e)
		}
		return out
	}
	return []cty.Value{v}
}

// nested is the schema of one element of a nested block or nested attribute.
type nested struct {
	block *plugin.Block                // a nested block's
	attrs map[string]*plugin.Attribute // a nested attribute's
}

func (n nested) propose(prior, cfg cty.Value) cty.Value {
	if n.block != nil {
		return proposedBlock(n.block, prior, cfg)
	}
	if cfg.IsNull() {
		return cfg
	}
	return cty.ObjectVal(proposedAttrs(n.attrs, prior, cfg))
}

func proposedNestedBlock(nb *plugin.NestedBlock, prior, cfg cty.Value) cty.Value {
	if !cfg.IsKnown() {
		return cfg
	}
	n := nested{block: nb.Block}
	if nb.Block == nil {
		n.block = &plugin.Block{}
	}
	switch nb.NestingMode {
	case "single":
		if cfg.IsNull() {
			return cfg
		}
		return n.propose(prior, cfg)
	case "group":
		return n.propose(prior, cfg)
	}
	return proposedCollection(nb.NestingMode, n, prior, cfg)
}

func proposedNestedAttr(nt *plugin.NestedType, prior, cfg cty.Value) cty.Value {
	if !cfg.IsKnown() {
		return cfg
	}
	n := nested{attrs: nt.Attributes}
	switch nt.NestingMode {
	case "list", "set", "map":
		return proposedCollection(nt.NestingMode, n, prior, cfg)
	}
	if cfg.IsNull() {
		return cfg
	}
	return n.propose(prior, cfg)
}

// proposedCollection matches each configured element with its prior one: by index in a list,
// by key in a map, and in a set with the first unused prior element the configuration could have
// made. An element with no prior one is proposed with none.
func proposedCollection(mode string, n nested, prior, cfg cty.Value) cty.Value {
	if cfg.IsNull() || !cfg.IsKnown() || cfg.LengthInt() == 0 {
		return cfg
	}
	var out []cty.Value
	switch mode {
	case "list":
		for it := cfg.ElementIterator(); it.Next(); {
			idx, c := it.Element()
			if prior.IsKnown() && (prior.IsNull() || !prior.HasIndex(idx).True()) {
				out = append(out, c)
				continue
			}
			out = append(out, n.propose(prior.Index(idx), c))
		}
		if cfg.Type().IsTupleType() {
			return cty.TupleVal(out)
		}
		return cty.ListVal(out)
	case "map":
		priorMap := map[string]cty.Value{}
		if !prior.IsNull() && prior.IsKnown() && prior.LengthInt() > 0 {
			priorMap = prior.AsValueMap()
		}
		vals := map[string]cty.Value{}
		for k, c := range cfg.AsValueMap() {
			if p, ok := priorMap[k]; ok {
				vals[k] = n.propose(p, c)
			} else {
				vals[k] = c
			}
		}
		if cfg.Type().IsObjectType() {
			return cty.ObjectVal(vals)
		}
		return cty.MapVal(vals)
	case "set":
		var priors []cty.Value
		if prior.IsKnown() && !prior.IsNull() {
			priors = prior.AsValueSlice()
		}
		used := make([]bool, len(priors))
		for _, c := range cfg.AsValueSlice() {
			p := cty.NullVal(cfg.Type().ElementType())
			for i, cand := range priors {
				if !used[i] && n.couldMake(cand, c) {
					p, used[i] = cand, true
					break
				}
			}
			out = append(out, n.propose(p, c))
		}
		return cty.SetVal(out)
	}
	return cfg
}

// couldMake reports whether the prior element could have come from the configured one: where
// they differ, the attribute is computed and the configuration leaves it null. Nested sets must
// be equal.
func (n nested) couldMake(prior, cfg cty.Value) bool {
	if prior.RawEquals(cfg) || prior.IsNull() {
		return true
	}
	if cfg.IsNull() || !prior.IsKnown() || !cfg.IsKnown() || !prior.Type().IsObjectType() || !cfg.Type().IsObjectType() {
		return false
	}
	attrs := n.attrs
	if n.block != nil {
		attrs = n.block.Attributes
	}
	for name, a := range attrs {
		p, c := prior.GetAttr(name), cfg.GetAttr(name)
		if p.RawEquals(c) || p.IsNull() {
			continue
		}
		if a.NestedType == nil {
			if !a.Computed || !c.IsNull() {
				return false
			}
			continue
		}
		if !nestedCouldMake(a.NestedType.NestingMode, nested{attrs: a.NestedType.Attributes}, p, c) {
			return false
		}
	}
	if n.block != nil {
		for name, nb := range n.block.BlockTypes {
			p, c := prior.GetAttr(name), cfg.GetAttr(name)
			if p.RawEquals(c) || p.IsNull() {
				continue
			}
			inner := nested{block: nb.Block}
			if nb.Block == nil {
				inner.block = &plugin.Block{}
			}
			if !nestedCouldMake(nb.NestingMode, inner, p, c) {
				return false
			}
		}
	}
	return true
}

// nestedCouldMake is couldMake for a nested value that differs: each prior element must have one
// in the configuration at its place that could have made it.
func nestedCouldMake(mode string, n nested, prior, cfg cty.Value) bool {
	if cfg.IsNull() || !cfg.IsKnown() || !prior.IsKnown() {
		return false
	}
	switch mode {
	case "set":
		return false
	case "list", "map":
		for it := prior.ElementIterator(); it.Next(); {
			k, p := it.Element()
			if !cfg.HasIndex(k).True() {
				return false
			}
			if !n.couldMake(p, cfg.Index(k)) {
				return false
			}
		}
		return true
	}
	return n.couldMake(prior, cfg)
}

// emptyBlock is a block with nothing set, as tofu decodes an empty configuration block: every
// attribute null, a single block null, a group with nothing set, other nested blocks empty.
func emptyBlock(b *plugin.Block, ty cty.Type) cty.Value {
	if !ty.IsObjectType() {
		return cty.NullVal(ty)
	}
	attrs := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		attrs[name] = cty.NullVal(at)
		if nb := b.BlockTypes[name]; nb != nil {
			attrs[name] = emptyNested(nb, at)
		}
	}
	return cty.ObjectVal(attrs)
}

// emptyNested is a nested block type's value when the configuration writes none of it.
func emptyNested(nb *plugin.NestedBlock, ty cty.Type) cty.Value {
	switch {
	case nb.NestingMode == "group":
		inner := nb.Block
		if inner == nil {
			inner = &plugin.Block{}
		}
		return emptyBlock(inner, ty)
	case ty.IsListType():
		return cty.ListValEmpty(ty.ElementType())
	case ty.IsSetType():
		return cty.SetValEmpty(ty.ElementType())
	case ty.IsMapType():
		return cty.MapValEmpty(ty.ElementType())
	case ty == cty.DynamicPseudoType && nb.NestingMode == "list":
		return cty.EmptyTupleVal
	case ty == cty.DynamicPseudoType && nb.NestingMode == "map":
		return cty.EmptyObjectVal
	}
	return cty.NullVal(ty)
}

// configShape gives a configuration as tofu decodes it: a nested block the configuration leaves
// out (null in the JSON a driver reads) is empty, not null; blocks it writes are shaped within.
func configShape(b *plugin.Block, v cty.Value) cty.Value {
	if b == nil || v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() || len(b.BlockTypes) == 0 {
		return v
	}
	attrs := v.AsValueMap()
	if attrs == nil {
		attrs = map[string]cty.Value{}
	}
	for name, nb := range b.BlockTypes {
		nv, ok := attrs[name]
		if !ok {
			continue
		}
		inner := nb.Block
		if inner == nil {
			inner = &plugin.Block{}
		}
		switch {
		case nv.IsNull():
			attrs[name] = emptyNested(nb, nv.Type())
		case !nv.IsKnown():
		case nb.NestingMode == "single" || nb.NestingMode == "group":
			attrs[name] = configShape(inner, nv)
		case nv.Type().IsListType() || nv.Type().IsSetType() || nv.Type().IsMapType() || nv.Type().IsTupleType() || nv.Type().IsObjectType():
			attrs[name] = shapeElements(inner, nv)
		}
	}
	return cty.ObjectVal(attrs)
}

// shapeElements shapes each element of a collection of nested blocks.
func shapeElements(b *plugin.Block, v cty.Value) cty.Value {
	if v.LengthInt() == 0 {
		return v
	}
	ty := v.Type()
	switch {
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		var out []cty.Value
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, configShape(b, e))
		}
		switch {
		case ty.IsListType():
			return cty.ListVal(out)
		case ty.IsSetType():
			return cty.SetVal(out)
		}
		return cty.TupleVal(out)
	}
	out := map[string]cty.Value{}
	for k, e := range v.AsValueMap() {
		out[k] = configShape(b, e)
	}
	if ty.IsMapType() {
		return cty.MapVal(out)
	}
	return cty.ObjectVal(out)
}
