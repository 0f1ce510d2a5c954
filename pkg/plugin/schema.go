package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/plugin/tfplugin5"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// SchemaFormatVersion is the format_version of `tofu providers schema -json`.
const SchemaFormatVersion = "1.0"

// Schemas is the document `tofu providers schema -json` prints.
type Schemas struct {
	FormatVersion   string                     `json:"format_version"`
	ProviderSchemas map[string]*ProviderSchema `json:"provider_schemas,omitempty"`
}

// ProviderSchema is one provider's entry, in the shape tofu prints it.
type ProviderSchema struct {
	Provider                 *Schema              `json:"provider,omitempty"`
	ResourceSchemas          map[string]*Schema   `json:"resource_schemas,omitempty"`
	DataSourceSchemas        map[string]*Schema   `json:"data_source_schemas,omitempty"`
	EphemeralResourceSchemas map[string]*Schema   `json:"ephemeral_resource_schemas,omitempty"`
	Functions                map[string]*Function `json:"functions,omitempty"`
}

// Schema is a versioned block.
type Schema struct {
	Version int64  `json:"version"`
	Block   *Block `json:"block,omitempty"`
}

// Block is a configuration block's schema.
type Block struct {
	Attributes      map[string]*Attribute   `json:"attributes,omitempty"`
	BlockTypes      map[string]*NestedBlock `json:"block_types,omitempty"`
	Description     string                  `json:"description,omitempty"`
	DescriptionKind string                  `json:"description_kind,omitempty"`
	Deprecated      bool                    `json:"deprecated,omitempty"`
}

// Attribute is one attribute's schema.
type Attribute struct {
	Type            json.RawMessage `json:"type,omitempty"`
	NestedType      *NestedType     `json:"nested_type,omitempty"`
	Description     string          `json:"description,omitempty"`
	DescriptionKind string          `json:"description_kind,omitempty"`
	Deprecated      bool            `json:"deprecated,omitempty"`
	Required        bool            `json:"required,omitempty"`
	Optional        bool            `json:"optional,omitempty"`
	Computed        bool            `json:"computed,omitempty"`
	Sensitive       bool            `json:"sensitive,omitempty"`
	WriteOnly       bool            `json:"write_only,omitempty"`
}

// Secret is the one rule for what in a value is secret, by the schema: an attribute marked
// sensitive or write-only. Audit, rules, recording and replay all apply it (pkg/protocol says
// which values are read by the schema at all).
func (a *Attribute) Secret() bool { return a.Sensitive || a.WriteOnly }

// SecretAt says whether the value at path p inside a value of block b is secret: it is, or lies
// inside, a secret attribute. Steps are attribute or block names (strings), and after a nested
// collection its element's index or key. A path the schema does not describe is not secret by
// the schema (the classes of pkg/protocol decide about values no schema describes).
func (b *Block) SecretAt(p []any) bool {
	for i := 0; i < len(p) && b != nil; i++ {
		name, ok := p[i].(string)
		if !ok {
			return false
		}
		if a := b.Attributes[name]; a != nil {
			if a.Secret() {
				return true
			}
			if a.NestedType == nil {
				return false
			}
			b = &Block{Attributes: a.NestedType.Attributes}
			if m := a.NestedType.NestingMode; m != "single" && m != "group" && m != "" {
				i++ // the element's index or key
			}
			continue
		}
		nb := b.BlockTypes[name]
		if nb == nil {
			return false
		}
		b = nb.Block
		if m := nb.NestingMode; m != "single" && m != "group" && m != "" {
			i++
		}
	}
	return false
}

// NestedType is a nested attribute type (protocol 6).
type NestedType struct {
	Attributes  map[string]*Attribute `json:"attributes,omitempty"`
	NestingMode string                `json:"nesting_mode,omitempty"`
}

// NestedBlock is a nested block type.
type NestedBlock struct {
	NestingMode string `json:"nesting_mode,omitempty"`
	Block       *Block `json:"block,omitempty"`
	MinItems    int64  `json:"min_items,omitempty"`
	MaxItems    int64  `json:"max_items,omitempty"`
}

// Function is a provider function's signature.
type Function struct {
	Description        string          `json:"description"`
	Summary            string          `json:"summary,omitempty"`
	DeprecationMessage string          `json:"deprecation_message,omitempty"`
	ReturnType         json.RawMessage `json:"return_type"`
	Parameters         []*Parameter    `json:"parameters,omitempty"`
	VariadicParameter  *Parameter      `json:"variadic_parameter,omitempty"`
}

// Parameter is one function parameter.
type Parameter struct {
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	IsNullable  bool            `json:"is_nullable,omitempty"`
	Type        json.RawMessage `json:"type"`
}

// Diagnostics is an error a provider reported.
type Diagnostics []string

func (d Diagnostics) Error() string { return strings.Join(d, "; ") }

// Schema asks the provider for its schema (GetProviderSchema, or GetSchema in protocol 5) and
// returns it in the shape of `tofu providers schema -json`.
func (p *Provider) Schema(ctx context.Context) (*ProviderSchema, error) {
	switch {
	case p.v6 != nil:
		resp, err := p.v6.GetProviderSchema(ctx, &tfplugin6.GetProviderSchema_Request{})
		if err != nil {
			return nil, fmt.Errorf("GetProviderSchema: %w", err)
		}
		return providerSchema6(resp)
	case p.v5 != nil:
		resp, err := p.v5.GetSchema(ctx, &tfplugin5.GetProviderSchema_Request{})
		if err != nil {
			return nil, fmt.Errorf("GetSchema: %w", err)
		}
		return providerSchema5(resp)
	}
	return nil, fmt.Errorf("provider %s is not connected", p.Path)
}

// SchemaFromWire reads a schema answer as a provider of the protocol sent it (the bytes of a
// GetProviderSchema response) in the shape of `tofu providers schema -json`.
func SchemaFromWire(protocol int, wire []byte) (*ProviderSchema, error) {
	switch protocol {
	case 6:
		var resp tfplugin6.GetProviderSchema_Response
		if err := proto.Unmarshal(wire, &resp); err != nil {
			return nil, fmt.Errorf("GetProviderSchema: %w", err)
		}
		return providerSchema6(&resp)
	case 5:
		var resp tfplugin5.GetProviderSchema_Response
		if err := proto.Unmarshal(wire, &resp); err != nil {
			return nil, fmt.Errorf("GetSchema: %w", err)
		}
		return providerSchema5(&resp)
	}
	return nil, fmt.Errorf("plugin protocol %d has no schema oprov reads (it speaks 5 and 6)", protocol)
}

func providerSchema6(resp *tfplugin6.GetProviderSchema_Response) (*ProviderSchema, error) {
	if d := diags6(resp.Diagnostics); d != nil {
		return nil, fmt.Errorf("GetProviderSchema: the provider reported: %w", d)
	}
	out := &ProviderSchema{Provider: schema6(resp.Provider)}
	out.ResourceSchemas = schemaMap(resp.ResourceSchemas, schema6)
	out.DataSourceSchemas = schemaMap(resp.DataSourceSchemas, schema6)
	out.EphemeralResourceSchemas = schemaMap(resp.EphemeralResourceSchemas, schema6)
	out.Functions = functionMap(resp.Functions, func(f *tfplugin6.Function) *Function {
		return function(f.Summary, f.Description, f.DeprecationMessage, f.Return.GetType(),
			params6(f.Parameters), param6(f.VariadicParameter))
	})
	return out, nil
}

func providerSchema5(resp *tfplugin5.GetProviderSchema_Response) (*ProviderSchema, error) {
	if d := diags5(resp.Diagnostics); d != nil {
		return nil, fmt.Errorf("GetSchema: the provider reported: %w", d)
	}
	out := &ProviderSchema{Provider: schema5(resp.Provider)}
	out.ResourceSchemas = schemaMap(resp.ResourceSchemas, schema5)
	out.DataSourceSchemas = schemaMap(resp.DataSourceSchemas, schema5)
	out.EphemeralResourceSchemas = schemaMap(resp.EphemeralResourceSchemas, schema5)
	out.Functions = functionMap(resp.Functions, func(f *tfplugin5.Function) *Function {
		return function(f.Summary, f.Description, f.DeprecationMessage, f.Return.GetType(),
			params5(f.Parameters), param5(f.VariadicParameter))
	})
	return out, nil
}

func schemaMap[S any](in map[string]S, conv func(S) *Schema) map[string]*Schema {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]*Schema, len(in))
	for k, v := range in {
		out[k] = conv(v)
	}
	return out
}

func functionMap[F any](in map[string]F, conv func(F) *Function) map[string]*Function {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]*Function, len(in))
	for k, v := range in {
		out[k] = conv(v)
	}
	return out
}

func function(summary, description, deprecation string, ret []byte, params []*Parameter, variadic *Parameter) *Function {
	return &Function{Description: description, Summary: summary, DeprecationMessage: deprecation,
		ReturnType: rawType(ret), Parameters: params, VariadicParameter: variadic}
}

// rawType keeps a cty type's JSON as the provider sent it.
func rawType(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// kind names a description's kind; tofu prints it even for an empty description.
func kind(isMarkdown bool, _ string) string {
	if isMarkdown {
		return "markdown"
	}
	return "plain"
}

func nesting(name string) string { return strings.ToLower(name) }

// Protocol 6.

func schema6(s *tfplugin6.Schema) *Schema {
	if s == nil {
		return nil
	}
	return &Schema{Version: s.Version, Block: block6(s.Block)}
}

func block6(b *tfplugin6.Schema_Block) *Block {
	if b == nil {
		return &Block{}
	}
	out := &Block{Description: b.Description, DescriptionKind: kind(b.DescriptionKind == tfplugin6.StringKind_MARKDOWN, b.Description), Deprecated: b.Deprecated}
	if len(b.Attributes) > 0 {
		out.Attributes = map[string]*Attribute{}
		for _, a := range b.Attributes {
			out.Attributes[a.Name] = attr6(a)
		}
	}
	if len(b.BlockTypes) > 0 {
		out.BlockTypes = map[string]*NestedBlock{}
		for _, nb := range b.BlockTypes {
			out.BlockTypes[nb.TypeName] = &NestedBlock{NestingMode: nesting(nb.Nesting.String()), Block: block6(nb.Block), MinItems: nb.MinItems, MaxItems: nb.MaxItems}
		}
	}
	return out
}

func attr6(a *tfplugin6.Schema_Attribute) *Attribute {
	out := &Attribute{Type: rawType(a.Type), Description: a.Description, DescriptionKind: kind(a.DescriptionKind == tfplugin6.StringKind_MARKDOWN, a.Description),
		Deprecated: a.Deprecated, Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive, WriteOnly: a.WriteOnly}
	if nt := a.NestedType; nt != nil {
		out.NestedType = &NestedType{NestingMode: nesting(nt.Nesting.String()), Attributes: map[string]*Attribute{}}
		for _, na := range nt.Attributes {
			out.NestedType.Attributes[na.Name] = attr6(na)
		}
	}
	return out
}

func params6(ps []*tfplugin6.Function_Parameter) []*Parameter {
	var out []*Parameter
	for _, p := range ps {
		out = append(out, param6(p))
	}
	return out
}

func param6(p *tfplugin6.Function_Parameter) *Parameter {
	if p == nil {
		return nil
	}
	return &Parameter{Name: p.Name, Description: p.Description, IsNullable: p.AllowNullValue, Type: rawType(p.Type)}
}

func diags6(ds []*tfplugin6.Diagnostic) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == tfplugin6.Diagnostic_ERROR {
			out = append(out, strings.TrimSpace(d.Summary+": "+d.Detail))
		}
	}
	return out
}

// Protocol 5.

func schema5(s *tfplugin5.Schema) *Schema {
	if s == nil {
		return nil
	}
	return &Schema{Version: s.Version, Block: block5(s.Block)}
}

func block5(b *tfplugin5.Schema_Block) *Block {
	if b == nil {
		return &Block{}
	}
	out := &Block{Description: b.Description, DescriptionKind: kind(b.DescriptionKind == tfplugin5.StringKind_MARKDOWN, b.Description), Deprecated: b.Deprecated}
	if len(b.Attributes) > 0 {
		out.Attributes = map[string]*Attribute{}
		for _, a := range b.Attributes {
			out.Attributes[a.Name] = &Attribute{Type: rawType(a.Type), Description: a.Description, DescriptionKind: kind(a.DescriptionKind == tfplugin5.StringKind_MARKDOWN, a.Description),
				Deprecated: a.Deprecated, Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive, WriteOnly: a.WriteOnly}
		}
	}
	if len(b.BlockTypes) > 0 {
		out.BlockTypes = map[string]*NestedBlock{}
		for _, nb := range b.BlockTypes {
			out.BlockTypes[nb.TypeName] = &NestedBlock{NestingMode: nesting(nb.Nesting.String()), Block: block5(nb.Block), MinItems: nb.MinItems, MaxItems: nb.MaxItems}
		}
	}
	return out
}

func params5(ps []*tfplugin5.Function_Parameter) []*Parameter {
	var out []*Parameter
	for _, p := range ps {
		out = append(out, param5(p))
	}
	return out
}

func param5(p *tfplugin5.Function_Parameter) *Parameter {
	if p == nil {
		return nil
	}
	return &Parameter{Name: p.Name, Description: p.Description, IsNullable: p.AllowNullValue, Type: rawType(p.Type)}
}

func diags5(ds []*tfplugin5.Diagnostic) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == tfplugin5.Diagnostic_ERROR {
			out = append(out, strings.TrimSpace(d.Summary+": "+d.Detail))
		}
	}
	return out
}
