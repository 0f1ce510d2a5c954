package stdiohost

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// initResult is the answer to initialize.
type initResult struct {
	ProtocolVersion string `json:"protocol_version"`
	Provider        struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"provider"`
	Capabilities struct {
		Concurrent bool `json:"concurrent"`
		Validate   bool `json:"validate"`
		Plan       bool `json:"plan"`
		Upgrade    bool `json:"upgrade"`
	} `json:"capabilities"`
	Schema *wireSchema `json:"schema"`
}

type wireSchema struct {
	Provider    *wireBlock               `json:"provider"`
	Resources   map[string]*wireBlock    `json:"resources"`
	DataSources map[string]*wireBlock    `json:"data_sources"`
	Functions   map[string]*wireFunction `json:"functions"`
}

type wireBlock struct {
	Version     int64                     `json:"version"`
	Description string                    `json:"description"`
	Attributes  map[string]*wireAttribute `json:"attributes"`
}

type wireAttribute struct {
	Type        json.RawMessage `json:"type"`
	Required    bool            `json:"required"`
	Optional    bool            `json:"optional"`
	Computed    bool            `json:"computed"`
	Sensitive   bool            `json:"sensitive"`
	Replace     bool            `json:"replace"`
	Description string          `json:"description"`
}

type wireFunction struct {
	Parameters []struct {
		Name        string          `json:"name"`
		Type        json.RawMessage `json:"type"`
		Description string          `json:"description"`
		AllowNull   bool            `json:"allow_null"`
	} `json:"parameters"`
	Return      json.RawMessage `json:"return"`
	Description string          `json:"description"`
}

// attribute is one checked attribute of a block.
type attribute struct {
	wireAttribute
	ty  cty.Type
	tft tftypes.Type
}

// block is a checked schema of the provider, a resource or a data source.
type block struct {
	version int64
	desc    string
	attrs   map[string]*attribute
	ty      cty.Type
}

type function struct {
	params []cty.Type
	ret    cty.Type
	proto  *tfprotov6.Function
}

// schema is the provider's checked schema.
type schema struct {
	provider  *block
	resources map[string]*block
	data      map[string]*block
	functions map[string]*function
}

// checkSchema turns the wire schema into one oprov can plan with, or says what is wrong.
func checkSchema(typ string, w *wireSchema) (*schema, error) {
	if w == nil {
		return nil, fmt.Errorf("initialize's answer has no \"schema\"")
	}
	s := &schema{resources: map[string]*block{}, data: map[string]*block{}, functions: map[string]*function{}}
	var err error
	if s.provider, err = checkBlock("provider", w.Provider); err != nil {
		return nil, err
	}
	for name, b := range w.Resources {
		if !strings.HasPrefix(name, typ+"_") {
			return nil, fmt.Errorf("resource type %q must be named after the provider: %s_NAME", name, typ)
		}
		if s.resources[name], err = checkBlock("resource "+name, b); err != nil {
			return nil, err
		}
	}
	for name, b := range w.DataSources {
		if !strings.HasPrefix(name, typ+"_") {
			return nil, fmt.Errorf("data source type %q must be named after the provider: %s_NAME", name, typ)
		}
		if s.data[name], err = checkBlock("data source "+name, b); err != nil {
			return nil, err
		}
	}
	for name, f := range w.Functions {
		if s.functions[name], err = checkFunction(name, f); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func checkBlock(what string, w *wireBlock) (*block, error) {
	b := &block{attrs: map[string]*attribute{}}
	if w == nil {
		b.ty = cty.EmptyObject
		return b, nil
	}
	b.version, b.desc = w.Version, w.Description
	types := map[string]cty.Type{}
	for name, a := range w.Attributes {
		at, err := checkAttribute(a)
		if err != nil {
			return nil, fmt.Errorf("schema of %s, attribute %q: %w", what, name, err)
		}
		b.attrs[name] = at
		types[name] = at.ty
	}
	b.ty = cty.Object(types)
	return b, nil
}

func checkAttribute(a *wireAttribute) (*attribute, error) {
	if a == nil {
		return nil, fmt.Errorf("is null")
	}
	ty, tft, err := parseType(a.Type)
	if err != nil {
		return nil, err
	}
	switch {
	case a.Required && (a.Optional || a.Computed):
		return nil, fmt.Errorf("required cannot be optional or computed too")
	case !a.Required && !a.Optional && !a.Computed:
		return nil, fmt.Errorf("say one of \"required\": true, \"optional\": true or \"computed\": true")
	}
	return &attribute{wireAttribute: *a, ty: ty, tft: tft}, nil
}

// parseType reads a type in cty's JSON notation.
func parseType(raw json.RawMessage) (cty.Type, tftypes.Type, error) {
	if len(raw) == 0 {
		return cty.NilType, nil, fmt.Errorf("has no \"type\"")
	}
	ty, err := ctyjson.UnmarshalType(raw)
	if err != nil {
		return cty.NilType, nil, fmt.Errorf("type %s: %v (want \"string\", \"number\", \"bool\", [\"list\", T], [\"set\", T], [\"map\", T] or [\"object\", {NAME: T}])", clip(raw, 80), err)
	}
	//lint:ignore SA1019 cty's JSON type notation has no other reader in terraform-plugin-go
	tft, err := tftypes.ParseJSONType(raw)
	if err != nil {
		return cty.NilType, nil, fmt.Errorf("type %s: %v", clip(raw, 80), err)
	}
	return ty, tft, nil
}

func checkFunction(name string, w *wireFunction) (*function, error) {
	if w == nil {
		return nil, fmt.Errorf("function %q is null", name)
	}
	f := &function{proto: &tfprotov6.Function{Summary: w.Description, Description: w.Description}}
	for i, p := range w.Parameters {
		ty, tft, err := parseType(p.Type)
		if err != nil {
			return nil, fmt.Errorf("function %q, parameter %d (%s): %w", name, i, p.Name, err)
		}
		f.params = append(f.params, ty)
		f.proto.Parameters = append(f.proto.Parameters, &tfprotov6.FunctionParameter{Name: p.Name, Type: tft, Description: p.Description, AllowNullValue: p.AllowNull})
	}
	ty, tft, err := parseType(w.Return)
	if err != nil {
		return nil, fmt.Errorf("function %q, return: %w", name, err)
	}
	f.ret = ty
	f.proto.Return = &tfprotov6.FunctionReturn{Type: tft}
	return f, nil
}

// proto is the block as plugin protocol 6 describes it.
func (b *block) proto() *tfprotov6.Schema {
	names := make([]string, 0, len(b.attrs))
	for n := range b.attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	pb := &tfprotov6.SchemaBlock{Description: b.desc}
	for _, n := range names {
		a := b.attrs[n]
		pb.Attributes = append(pb.Attributes, &tfprotov6.SchemaAttribute{Name: n, Type: a.tft, Description: a.Description,
			Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive})
	}
	return &tfprotov6.Schema{Version: b.version, Block: pb}
}
