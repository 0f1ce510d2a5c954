package stdiohost

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
)

// decodeDV reads a value tofu sent (msgpack, or JSON from older callers) as type ty.
func decodeDV(dv *tfprotov6.DynamicValue, ty cty.Type) (cty.Value, error) {
	switch {
	case dv == nil:
		return cty.NullVal(ty), nil
	case len(dv.MsgPack) > 0:
		return ctymsgpack.Unmarshal(dv.MsgPack, ty)
	case len(dv.JSON) > 0:
		return ctyjson.Unmarshal(dv.JSON, ty)
	}
	return cty.NullVal(ty), nil
}

// encodeDV writes a value for tofu as msgpack.
func encodeDV(v cty.Value, ty cty.Type) (*tfprotov6.DynamicValue, error) {
	b, err := ctymsgpack.Marshal(v, ty)
	if err != nil {
		return nil, err
	}
	return &tfprotov6.DynamicValue{MsgPack: b}, nil
}

// knownOnly replaces unknown values by nulls: what the program sees outside the hooks.
func knownOnly(v cty.Value) cty.Value {
	out, _ := cty.Transform(v, func(_ cty.Path, v cty.Value) (cty.Value, error) {
		if !v.IsKnown() {
			return cty.NullVal(v.Type()), nil
		}
		return v, nil
	})
	return out
}

// tfPath turns a cty path into the protocol's attribute path.
func tfPath(p cty.Path) *tftypes.AttributePath {
	ap := tftypes.NewAttributePath()
	for _, s := range p {
		switch s := s.(type) {
		case cty.GetAttrStep:
			ap = ap.WithAttributeName(s.Name)
		case cty.IndexStep:
			switch {
			case !s.Key.IsKnown():
				return ap
			case s.Key.Type() == cty.String:
				ap = ap.WithElementKeyString(s.Key.AsString())
			default:
				i, _ := s.Key.AsBigFloat().Int64()
				ap = ap.WithElementKeyInt(int(i))
			}
		}
	}
	return ap
}

// wirePath reads a path the program gave: names of attributes and indices of lists.
func wirePath(steps []any) (*tftypes.AttributePath, error) {
	ap := tftypes.NewAttributePath()
	for _, s := range steps {
		switch s := s.(type) {
		case string:
			ap = ap.WithAttributeName(s)
		case float64:
			ap = ap.WithElementKeyInt(int(s))
		case json.Number:
			i, err := s.Int64()
			if err != nil {
				return nil, err
			}
			ap = ap.WithElementKeyInt(int(i))
		default:
			return nil, fmt.Errorf("path step %v is neither a name nor an index", s)
		}
	}
	return ap, nil
}

// diags turns an error into tofu's diagnostics: an error answer from the program keeps its
// message, detail, severity and attribute path.
func diags(err error, context string) []*tfprotov6.Diagnostic {
	if err == nil {
		return nil
	}
	d := &tfprotov6.Diagnostic{Severity: tfprotov6.DiagnosticSeverityError, Summary: context, Detail: err.Error()}
	var ce *callError
	var pe *pathError
	switch {
	case errors.As(err, &ce):
		d.Summary, d.Detail = ce.Message, ce.Detail
		if d.Detail == "" {
			d.Detail = fmt.Sprintf("%s (the provider's answer to %s)", context, ce.Method)
		}
		if ce.Severity == "warning" {
			d.Severity = tfprotov6.DiagnosticSeverityWarning
		}
		if len(ce.Path) > 0 {
			if ap, perr := wirePath(ce.Path); perr == nil {
				d.Attribute = ap
			}
		}
	case errors.As(err, &pe):
		d.Attribute = tfPath(pe.path)
	}
	return []*tfprotov6.Diagnostic{d}
}
