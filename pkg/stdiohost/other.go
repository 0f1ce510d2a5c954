package stdiohost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
)

func (h *Host) dataSource(ctx context.Context, typ string) (*block, []*tfprotov6.Diagnostic) {
	s, err := h.ready(ctx)
	if err != nil {
		return nil, h.startDiags(err)
	}
	b := s.data[typ]
	if b == nil {
		return nil, diags(fmt.Errorf("stdio provider %s has no data source %q", h.man.Type, typ), "Unknown data source")
	}
	return b, nil
}

func (h *Host) ValidateDataResourceConfig(ctx context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	b, ds := h.dataSource(ctx, req.TypeName)
	if b == nil {
		return &tfprotov6.ValidateDataResourceConfigResponse{Diagnostics: ds}, nil
	}
	return &tfprotov6.ValidateDataResourceConfigResponse{Diagnostics: h.validate(ctx, "data_source", req.TypeName, b, req.Config)}, nil
}

func (h *Host) ReadDataSource(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	b, ds := h.dataSource(ctx, req.TypeName)
	if b == nil {
		return &tfprotov6.ReadDataSourceResponse{Diagnostics: ds}, nil
	}
	cfg, err := decodeDV(req.Config, b.ty)
	var res stateResult
	var j json.RawMessage
	if err == nil {
		j, err = toJSON(cfg, false)
	}
	if err == nil {
		err = h.call(ctx, "read_data", map[string]any{"type": req.TypeName, "config": j}, &res)
	}
	var v cty.Value
	if err == nil {
		v, err = readState(res.State, b.ty, cfg)
	}
	if err == nil && v.IsNull() {
		err = errors.New("the provider answered read_data with a null state")
	}
	var dv *tfprotov6.DynamicValue
	if err == nil {
		dv, err = encodeDV(v, b.ty)
	}
	return &tfprotov6.ReadDataSourceResponse{State: dv, Diagnostics: diags(err, "Reading data source "+req.TypeName)}, nil
}

func (h *Host) CallFunction(ctx context.Context, req *tfprotov6.CallFunctionRequest) (*tfprotov6.CallFunctionResponse, error) {
	s, err := h.ready(ctx)
	if err != nil {
		return &tfprotov6.CallFunctionResponse{Error: &tfprotov6.FunctionError{Text: err.Error()}}, nil
	}
	f := s.functions[req.Name]
	if f == nil {
		return &tfprotov6.CallFunctionResponse{Error: &tfprotov6.FunctionError{Text: fmt.Sprintf("stdio provider %s has no function %q", h.man.Type, req.Name)}}, nil
	}
	if len(req.Arguments) != len(f.params) {
		return &tfprotov6.CallFunctionResponse{Error: &tfprotov6.FunctionError{Text: fmt.Sprintf("function %s takes %d arguments, got %d", req.Name, len(f.params), len(req.Arguments))}}, nil
	}
	args := make([]json.RawMessage, len(req.Arguments))
	for i, a := range req.Arguments {
		v, err := decodeDV(a, f.params[i])
		if err == nil {
			args[i], err = toJSON(v, false)
		}
		if err != nil {
			n := int64(i)
			return &tfprotov6.CallFunctionResponse{Error: &tfprotov6.FunctionError{Text: err.Error(), FunctionArgument: &n}}, nil
		}
	}
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	var dv *tfprotov6.DynamicValue
	err = h.call(ctx, "call", map[string]any{"function": req.Name, "args": args}, &res)
	if err == nil {
		var j any
		var v cty.Value
		if j, err = decodeJSON(orNull(res.Result)); err == nil {
			if v, err = fromJSON(j, f.ret, cty.NilVal, nil, false); err == nil {
				dv, err = encodeDV(v, f.ret)
			}
		}
	}
	if err != nil {
		fe := &tfprotov6.FunctionError{Text: err.Error()}
		var ce *callError
		if errors.As(err, &ce) && ce.Argument != nil {
			n := int64(*ce.Argument)
			fe.FunctionArgument = &n
		}
		return &tfprotov6.CallFunctionResponse{Error: fe}, nil
	}
	return &tfprotov6.CallFunctionResponse{Result: dv}, nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// What stdio providers do not have: moved state, identities, generated config, ephemeral
// resources. Each answers with an error diagnostic that says so.

func unsupported(what string) []*tfprotov6.Diagnostic {
	return diags(errors.New("stdio providers do not support "+what), "Not supported")
}

func (h *Host) MoveResourceState(context.Context, *tfprotov6.MoveResourceStateRequest) (*tfprotov6.MoveResourceStateResponse, error) {
	return &tfprotov6.MoveResourceStateResponse{Diagnostics: unsupported("moving state between resource types")}, nil
}

func (h *Host) UpgradeResourceIdentity(context.Context, *tfprotov6.UpgradeResourceIdentityRequest) (*tfprotov6.UpgradeResourceIdentityResponse, error) {
	return &tfprotov6.UpgradeResourceIdentityResponse{Diagnostics: unsupported("resource identities")}, nil
}

func (h *Host) GenerateResourceConfig(context.Context, *tfprotov6.GenerateResourceConfigRequest) (*tfprotov6.GenerateResourceConfigResponse, error) {
	return &tfprotov6.GenerateResourceConfigResponse{Diagnostics: unsupported("generating configuration")}, nil
}

func (h *Host) ValidateEphemeralResourceConfig(context.Context, *tfprotov6.ValidateEphemeralResourceConfigRequest) (*tfprotov6.ValidateEphemeralResourceConfigResponse, error) {
	return &tfprotov6.ValidateEphemeralResourceConfigResponse{Diagnostics: unsupported("ephemeral resources")}, nil
}

func (h *Host) OpenEphemeralResource(context.Context, *tfprotov6.OpenEphemeralResourceRequest) (*tfprotov6.OpenEphemeralResourceResponse, error) {
	return &tfprotov6.OpenEphemeralResourceResponse{Diagnostics: unsupported("ephemeral resources")}, nil
}

func (h *Host) RenewEphemeralResource(context.Context, *tfprotov6.RenewEphemeralResourceRequest) (*tfprotov6.RenewEphemeralResourceResponse, error) {
	return &tfprotov6.RenewEphemeralResourceResponse{Diagnostics: unsupported("ephemeral resources")}, nil
}

func (h *Host) CloseEphemeralResource(context.Context, *tfprotov6.CloseEphemeralResourceRequest) (*tfprotov6.CloseEphemeralResourceResponse, error) {
	return &tfprotov6.CloseEphemeralResourceResponse{Diagnostics: unsupported("ephemeral resources")}, nil
}
