package main

import (
	"context"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// secrets_stack is served below the framework, which refuses a list of blocks holding a dynamic
// attribute: a name, and layer blocks {name, secret (sensitive), extra (dynamic)}. With a dynamic
// attribute inside, tofu sends the list of blocks as a dynamic value (a tuple when the layers'
// extras differ in type), so the sensitive attribute sits in a value whose type only the wire
// says. Its private state is raw bytes, not the framework's JSON.
const stackType = "secrets_stack"

var stackObject = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"name":  tftypes.String,
	"layer": tftypes.DynamicPseudoType,
}}

var stackSchema = &tfprotov6.Schema{Block: &tfprotov6.SchemaBlock{
	Attributes: []*tfprotov6.SchemaAttribute{{Name: "name", Type: tftypes.String, Required: true}},
	BlockTypes: []*tfprotov6.SchemaNestedBlock{{TypeName: "layer", Nesting: tfprotov6.SchemaNestedBlockNestingModeList, Block: &tfprotov6.SchemaBlock{
		Attributes: []*tfprotov6.SchemaAttribute{
			{Name: "name", Type: tftypes.String, Required: true},
			{Name: "secret", Type: tftypes.String, Optional: true, Sensitive: true},
			{Name: "extra", Type: tftypes.DynamicPseudoType, Optional: true},
		},
	}}},
}}

// withStack serves secrets_stack itself and everything else through the framework.
type withStack struct{ tfprotov6.ProviderServer }

func (s withStack) GetProviderSchema(ctx context.Context, req *tfprotov6.GetProviderSchemaRequest) (*tfprotov6.GetProviderSchemaResponse, error) {
	resp, err := s.ProviderServer.GetProviderSchema(ctx, req)
	if err == nil {
		resp.ResourceSchemas[stackType] = stackSchema
	}
	return resp, err
}

func (s withStack) GetMetadata(ctx context.Context, req *tfprotov6.GetMetadataRequest) (*tfprotov6.GetMetadataResponse, error) {
	resp, err := s.ProviderServer.GetMetadata(ctx, req)
	if err == nil {
		resp.Resources = append(resp.Resources, tfprotov6.ResourceMetadata{TypeName: stackType})
	}
	return resp, err
}

func (s withStack) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	if req.TypeName == stackType {
		return &tfprotov6.ValidateResourceConfigResponse{}, nil
	}
	return s.ProviderServer.ValidateResourceConfig(ctx, req)
}

func (s withStack) UpgradeResourceState(ctx context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	if req.TypeName != stackType {
		return s.ProviderServer.UpgradeResourceState(ctx, req)
	}
	v, err := req.RawState.UnmarshalWithOpts(stackObject, tfprotov6.UnmarshalOpts{})
	if err != nil {
		return nil, err
	}
	dv, err := tfprotov6.NewDynamicValue(stackObject, v)
	return &tfprotov6.UpgradeResourceStateResponse{UpgradedState: &dv}, err
}

func (s withStack) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	if req.TypeName != stackType {
		return s.ProviderServer.ReadResource(ctx, req)
	}
	saw("raw-private", string(req.Private), secretRawPrivate)
	return &tfprotov6.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}, nil
}

func (s withStack) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	if req.TypeName != stackType {
		return s.ProviderServer.PlanResourceChange(ctx, req)
	}
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: req.ProposedNewState, PlannedPrivate: req.PriorPrivate}, nil
}

func (s withStack) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	if req.TypeName != stackType {
		return s.ProviderServer.ApplyResourceChange(ctx, req)
	}
	if v, err := req.PlannedState.Unmarshal(stackObject); err == nil {
		saw("dynamic-typed-block", v.String(), secretDynTypedBlock)
	}
	return &tfprotov6.ApplyResourceChangeResponse{NewState: req.PlannedState, Private: []byte(secretRawPrivate)}, nil
}
