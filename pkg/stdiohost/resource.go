package stdiohost

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
)

// resource finds a resource type's schema, or says the provider has none of that name.
func (h *Host) resource(ctx context.Context, typ string) (*block, []*tfprotov6.Diagnostic) {
	s, err := h.ready(ctx)
	if err != nil {
		return nil, h.startDiags(err)
	}
	b := s.resources[typ]
	if b == nil {
		return nil, diags(fmt.Errorf("stdio provider %s has no resource type %q", h.man.Type, typ), "Unknown resource type")
	}
	return b, nil
}

// readState reads a state the program returned; attributes it left out keep keep's.
func readState(raw json.RawMessage, ty cty.Type, keep cty.Value) (cty.Value, error) {
	if len(raw) == 0 {
		return cty.NullVal(ty), nil
	}
	j, err := decodeJSON(raw)
	if err != nil {
		return cty.NilVal, err
	}
	if j == nil {
		return cty.NullVal(ty), nil
	}
	return fromJSON(j, ty, knownOnly(keep), nil, false)
}

func (h *Host) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	b, ds := h.resource(ctx, req.TypeName)
	if b == nil {
		return &tfprotov6.ValidateResourceConfigResponse{Diagnostics: ds}, nil
	}
	return &tfprotov6.ValidateResourceConfigResponse{Diagnostics: h.validate(ctx, "resource", req.TypeName, b, req.Config)}, nil
}

func (h *Host) UpgradeResourceState(ctx context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	b, ds := h.resource(ctx, req.TypeName)
	if b == nil {
		return &tfprotov6.UpgradeResourceStateResponse{Diagnostics: ds}, nil
	}
	v, err := h.upgrade(ctx, req, b)
	if err != nil {
		return &tfprotov6.UpgradeResourceStateResponse{Diagnostics: diags(err, "Upgrading the state of "+req.TypeName)}, nil
	}
	dv, err := encodeDV(v, b.ty)
	return &tfprotov6.UpgradeResourceStateResponse{UpgradedState: dv, Diagnostics: diags(err, "Upgrading the state of "+req.TypeName)}, nil
}

func (h *Host) upgrade(ctx context.Context, req *tfprotov6.UpgradeResourceStateRequest, b *block) (cty.Value, error) {
	if req.RawState == nil || len(req.RawState.JSON) == 0 {
		if req.RawState != nil && len(req.RawState.Flatmap) > 0 {
			return cty.NilVal, fmt.Errorf("the state of %s is in the flatmap form of Terraform 0.11, which stdio providers do not read", req.TypeName)
		}
		return cty.NullVal(b.ty), nil
	}
	raw := json.RawMessage(req.RawState.JSON)
	if req.Version > b.version {
		return cty.NilVal, fmt.Errorf("the state of %s was written by schema version %d, newer than the provider's %d; use that provider version", req.TypeName, req.Version, b.version)
	}
	if req.Version < b.version && h.info.Capabilities.Upgrade {
		var res stateResult
		if err := h.call(ctx, "upgrade", map[string]any{"type": req.TypeName, "version": req.Version, "state": raw}, &res); err != nil {
			return cty.NilVal, err
		}
		raw = res.State
	}
	j, err := decodeJSON(raw)
	if err != nil {
		return cty.NilVal, err
	}
	if m, ok := j.(map[string]any); ok { // attributes the schema no longer has are dropped
		for k := range m {
			if _, known := b.attrs[k]; !known {
				delete(m, k)
			}
		}
	}
	return fromJSON(j, b.ty, cty.NilVal, nil, false)
}

func (h *Host) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	b, ds := h.resource(ctx, req.TypeName)
	if b == nil {
		return &tfprotov6.ReadResourceResponse{Diagnostics: ds}, nil
	}
	resp := &tfprotov6.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}
	cur, err := decodeDV(req.CurrentState, b.ty)
	if err != nil || cur.IsNull() {
		resp.Diagnostics = diags(err, "Reading the state of "+req.TypeName)
		return resp, nil
	}
	var res stateResult
	j, err := toJSON(cur, false)
	if err == nil {
		err = h.call(ctx, "read", map[string]any{"type": req.TypeName, "state": j}, &res)
	}
	var nv cty.Value
	if err == nil {
		nv, err = readState(res.State, b.ty, cur)
	}
	if err == nil {
		resp.NewState, err = encodeDV(nv, b.ty)
	}
	resp.Diagnostics = diags(err, "Reading "+req.TypeName)
	return resp, nil
}

func (h *Host) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	b, ds := h.resource(ctx, req.TypeName)
	if b == nil {
		return &tfprotov6.PlanResourceChangeResponse{Diagnostics: ds}, nil
	}
	resp := &tfprotov6.PlanResourceChangeResponse{PlannedPrivate: req.PriorPrivate}
	prior, err := decodeDV(req.PriorState, b.ty)
	var config, proposed cty.Value
	if err == nil {
		config, err = decodeDV(req.Config, b.ty)
	}
	if err == nil {
		proposed, err = decodeDV(req.ProposedNewState, b.ty)
	}
	if err != nil {
		resp.Diagnostics = diags(err, "Reading the plan of "+req.TypeName)
		return resp, nil
	}
	planned, replace := plan(b, prior, config, proposed)
	if h.info.Capabilities.Plan && !planned.IsNull() {
		planned, replace, err = h.planHook(ctx, req.TypeName, b, prior, config, planned, replace)
	}
	if err == nil {
		resp.PlannedState, err = encodeDV(planned, b.ty)
	}
	resp.RequiresReplace = replace
	resp.Diagnostics = diags(err, "Planning "+req.TypeName)
	return resp, nil
}

// planHook lets the program adjust oprov's plan (the optional plan capability).
func (h *Host) planHook(ctx context.Context, typ string, b *block, prior, config, planned cty.Value, replace []*tftypes.AttributePath) (cty.Value, []*tftypes.AttributePath, error) {
	params := map[string]any{"type": typ}
	for name, v := range map[string]cty.Value{"prior": prior, "config": config, "proposed": planned} {
		j, err := toJSON(v, true)
		if err != nil {
			return planned, replace, err
		}
		params[name] = j
	}
	var res struct {
		Planned         json.RawMessage `json:"planned"`
		RequiresReplace [][]any         `json:"requires_replace"`
	}
	if err := h.call(ctx, "plan", params, &res); err != nil {
		return planned, replace, err
	}
	if len(res.Planned) > 0 {
		j, err := decodeJSON(res.Planned)
		if err != nil {
			return planned, replace, err
		}
		if planned, err = fromJSON(j, b.ty, planned, nil, true); err != nil {
			return planned, replace, err
		}
	}
	for _, p := range res.RequiresReplace {
		ap, err := wirePath(p)
		if err != nil {
			return planned, replace, err
		}
		replace = append(replace, ap)
	}
	return planned, replace, nil
}

// plan is oprov's plan for a resource: unknown computed values, prior values kept, and the
// attributes whose change replaces the object.
func plan(b *block, prior, config, proposed cty.Value) (cty.Value, []*tftypes.AttributePath) {
	if proposed.IsNull() || config.IsNull() {
		return proposed, nil // destroy
	}
	attrs := map[string]cty.Value{}
	changed := prior.IsNull()
	for name, a := range b.attrs {
		v := proposed.GetAttr(name)
		if a.Computed && config.GetAttr(name).IsNull() && prior.IsNull() {
			v = cty.UnknownVal(a.ty)
		}
		attrs[name] = v
		if !prior.IsNull() && !(a.Computed && !a.Optional) && !v.RawEquals(prior.GetAttr(name)) {
			changed = true
		}
	}
	var replace []*tftypes.AttributePath
	if !prior.IsNull() && changed {
		for name, a := range b.attrs {
			if a.Computed && !a.Optional && config.GetAttr(name).IsNull() {
				attrs[name] = cty.UnknownVal(a.ty) // computed again by update
			}
			if a.Replace && !attrs[name].RawEquals(prior.GetAttr(name)) {
				replace = append(replace, tftypes.NewAttributePath().WithAttributeName(name))
			}
		}
	}
	return cty.ObjectVal(attrs), replace
}

func (h *Host) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	b, ds := h.resource(ctx, req.TypeName)
	if b == nil {
		return &tfprotov6.ApplyResourceChangeResponse{Diagnostics: ds}, nil
	}
	resp := &tfprotov6.ApplyResourceChangeResponse{NewState: req.PriorState, Private: req.PlannedPrivate}
	prior, err := decodeDV(req.PriorState, b.ty)
	var planned cty.Value
	if err == nil {
		planned, err = decodeDV(req.PlannedState, b.ty)
	}
	if err != nil {
		resp.Diagnostics = diags(err, "Reading the plan of "+req.TypeName)
		return resp, nil
	}
	nv, err := h.apply(ctx, req.TypeName, b, prior, planned)
	if err != nil {
		if prior.IsNull() { // a failed create leaves nothing
			resp.NewState, _ = encodeDV(cty.NullVal(b.ty), b.ty)
		}
		resp.Diagnostics = diags(err, "Applying "+req.TypeName)
		return resp, nil
	}
	resp.NewState, err = encodeDV(nv, b.ty)
	resp.Diagnostics = diags(err, "Applying "+req.TypeName)
	return resp, nil
}

func (h *Host) apply(ctx context.Context, typ string, b *block, prior, planned cty.Value) (cty.Value, error) {
	if planned.IsNull() {
		j, err := toJSON(prior, false)
		if err == nil {
			err = h.call(ctx, "delete", map[string]any{"type": typ, "state": j}, nil)
		}
		return cty.NullVal(b.ty), err
	}
	cfg, err := toJSON(planned, false)
	if err != nil {
		return cty.NilVal, err
	}
	var res stateResult
	if prior.IsNull() {
		err = h.call(ctx, "create", map[string]any{"type": typ, "config": cfg}, &res)
	} else {
		var pj json.RawMessage
		if pj, err = toJSON(prior, false); err == nil {
			err = h.call(ctx, "update", map[string]any{"type": typ, "prior": pj, "config": cfg}, &res)
		}
	}
	if err != nil {
		return cty.NilVal, err
	}
	nv, err := readState(res.State, b.ty, planned)
	if err == nil && nv.IsNull() {
		err = fmt.Errorf("the provider answered %s with a null state; return the object it made", typ)
	}
	return nv, err
}

func (h *Host) ImportResourceState(ctx context.Context, req *tfprotov6.ImportResourceStateRequest) (*tfprotov6.ImportResourceStateResponse, error) {
	b, ds := h.resource(ctx, req.TypeName)
	if b == nil {
		return &tfprotov6.ImportResourceStateResponse{Diagnostics: ds}, nil
	}
	var res stateResult
	err := h.call(ctx, "import", map[string]any{"type": req.TypeName, "id": req.ID}, &res)
	var v cty.Value
	if err == nil {
		v, err = readState(res.State, b.ty, cty.NullVal(b.ty))
	}
	if err == nil && v.IsNull() {
		err = fmt.Errorf("the provider found no %s with id %q", req.TypeName, req.ID)
	}
	var dv *tfprotov6.DynamicValue
	if err == nil {
		dv, err = encodeDV(v, b.ty)
	}
	if err != nil {
		return &tfprotov6.ImportResourceStateResponse{Diagnostics: diags(err, "Importing "+req.TypeName)}, nil
	}
	return &tfprotov6.ImportResourceStateResponse{ImportedResources: []*tfprotov6.ImportedResource{{TypeName: req.TypeName, State: dv}}}, nil
}
