package stdiohost

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
)

func typeOf(addr string) string { t, _, _ := strings.Cut(addr, "."); return t }

// proposed is the new state tofu proposes: the configuration, with prior values where a
// computed attribute is left unset.
func proposed(b *block, prior, config cty.Value) cty.Value {
	if config.IsNull() {
		return config
	}
	attrs := map[string]cty.Value{}
	for name, a := range b.attrs {
		v := config.GetAttr(name)
		if a.Computed && v.IsNull() && !prior.IsNull() {
			v = prior.GetAttr(name)
		}
		attrs[name] = v
	}
	return cty.ObjectVal(attrs)
}

// apply plans and applies config (nil: destroy) for the resource addr, as tofu would.
func (c *checker) apply(ctx context.Context, addr string, raw json.RawMessage) (result, error) {
	typ := typeOf(addr)
	b, ds := c.h.resource(ctx, typ)
	if b == nil {
		return result{}, diagErr(ds)
	}
	prior, ok := c.state[addr]
	if !ok {
		prior = cty.NullVal(b.ty)
	}
	config := cty.NullVal(b.ty)
	if raw != nil {
		var err error
		if config, err = readState(raw, b.ty, cty.NilVal); err != nil {
			return result{}, err
		}
	}
	pdv, _ := encodeDV(prior, b.ty)
	cdv, _ := encodeDV(config, b.ty)
	ndv, _ := encodeDV(proposed(b, prior, config), b.ty)
	plan, _ := c.h.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: typ, PriorState: pdv, Config: cdv, ProposedNewState: ndv})
	if err := diagErr(plan.Diagnostics); err != nil {
		return result{}, err
	}
	replaced := len(plan.RequiresReplace) > 0
	if replaced { // as tofu does: destroy, then create
		if _, err := c.apply(ctx, addr, nil); err != nil {
			return result{}, err
		}
		r, err := c.apply(ctx, addr, raw)
		r.replaced = true
		return r, err
	}
	resp, _ := c.h.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{TypeName: typ, PriorState: pdv, PlannedState: plan.PlannedState, Config: cdv})
	if err := diagErr(resp.Diagnostics); err != nil {
		return result{}, err
	}
	return c.keep(addr, b, resp.NewState)
}

// keep records a resource's new state and gives it as JSON.
func (c *checker) keep(addr string, b *block, dv *tfprotov6.DynamicValue) (result, error) {
	v, err := decodeDV(dv, b.ty)
	if err != nil {
		return result{}, err
	}
	if v.IsNull() {
		delete(c.state, addr)
	} else {
		c.state[addr] = v
	}
	j, err := toJSON(v, false)
	return result{value: j}, err
}

func (c *checker) importOne(ctx context.Context, addr, id string) (result, error) {
	typ := typeOf(addr)
	b, ds := c.h.resource(ctx, typ)
	if b == nil {
		return result{}, diagErr(ds)
	}
	resp, _ := c.h.ImportResourceState(ctx, &tfprotov6.ImportResourceStateRequest{TypeName: typ, ID: id})
	if err := diagErr(resp.Diagnostics); err != nil {
		return result{}, err
	}
	if _, err := c.keep(addr, b, resp.ImportedResources[0].State); err != nil {
		return result{}, err
	}
	return c.read(ctx, addr)
}

func (c *checker) read(ctx context.Context, addr string) (result, error) {
	typ := typeOf(addr)
	b, ds := c.h.resource(ctx, typ)
	if b == nil {
		return result{}, diagErr(ds)
	}
	cur, ok := c.state[addr]
	if !ok {
		return result{}, fmt.Errorf("%s has no state: apply or import it first", addr)
	}
	dv, _ := encodeDV(cur, b.ty)
	resp, _ := c.h.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: typ, CurrentState: dv})
	if err := diagErr(resp.Diagnostics); err != nil {
		return result{}, err
	}
	return c.keep(addr, b, resp.NewState)
}

func (c *checker) data(ctx context.Context, typ string, raw json.RawMessage) (result, error) {
	b, ds := c.h.dataSource(ctx, typ)
	if b == nil {
		return result{}, diagErr(ds)
	}
	dv, err := valueDV(raw, b.ty)
	if err != nil {
		return result{}, err
	}
	resp, _ := c.h.ReadDataSource(ctx, &tfprotov6.ReadDataSourceRequest{TypeName: typ, Config: dv})
	if err := diagErr(resp.Diagnostics); err != nil {
		return result{}, err
	}
	v, err := decodeDV(resp.State, b.ty)
	if err != nil {
		return result{}, err
	}
	j, err := toJSON(v, false)
	return result{value: j}, err
}

func (c *checker) call(ctx context.Context, name string, args []any) (result, error) {
	s, err := c.h.ready(ctx)
	if err != nil {
		return result{}, err
	}
	f := s.functions[name]
	if f == nil {
		return result{}, fmt.Errorf("the provider has no function %q", name)
	}
	if len(args) != len(f.params) {
		return result{}, fmt.Errorf("function %s takes %d arguments, the step gives %d", name, len(f.params), len(args))
	}
	var dvs []*tfprotov6.DynamicValue
	for i, a := range args {
		raw, _ := json.Marshal(a)
		dv, err := valueDV(raw, f.params[i])
		if err != nil {
			return result{}, fmt.Errorf("argument %d: %w", i, err)
		}
		dvs = append(dvs, dv)
	}
	resp, _ := c.h.CallFunction(ctx, &tfprotov6.CallFunctionRequest{Name: name, Arguments: dvs})
	if resp.Error != nil {
		return result{}, fmt.Errorf("%s", resp.Error.Text)
	}
	v, err := decodeDV(resp.Result, f.ret)
	if err != nil {
		return result{}, err
	}
	j, err := toJSON(v, false)
	return result{value: j}, err
}
