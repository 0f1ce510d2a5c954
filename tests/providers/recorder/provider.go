package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type recorder struct{}

func (*recorder) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "recorder"
}

// Schema has one attribute, a sensitive token: a provider secret that must stay out of records.
func (*recorder) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = pschema.Schema{Attributes: map[string]pschema.Attribute{
		"token": pschema.StringAttribute{Optional: true, Sensitive: true},
	}}
}

func (*recorder) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}

func (*recorder) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return &thing{typeName: "recorder_thing"} },
		func() resource.Resource { return &thing{typeName: "recorder_old"} },
	}
}

func (*recorder) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &info{} }}
}

func (*recorder) Functions(context.Context) []func() function.Function {
	return []func() function.Function{func() function.Function { return &shout{} }}
}

// thing is recorder_thing: a name, tags, a sensitive secret, and an id derived from the name.
// It keeps private data ("made-by" = "recorder"), imports by id ("thing-NAME"), and takes state
// moved from recorder_old, the same resource under another type name.
type thing struct{ typeName string }

var (
	_ resource.ResourceWithImportState = &thing{}
	_ resource.ResourceWithMoveState   = &thing{}
)

func (t *thing) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	m := thingModel{ID: types.StringValue(req.ID), Name: types.StringValue(strings.TrimPrefix(req.ID, "thing-")),
		Tags: types.MapNull(types.StringType), Secret: types.StringNull()}
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, "made-by", []byte(`"recorder"`))...)
}

func (t *thing) MoveState(context.Context) []resource.StateMover {
	return []resource.StateMover{{StateMover: func(ctx context.Context, req resource.MoveStateRequest, resp *resource.MoveStateResponse) {
		if req.SourceTypeName != "recorder_old" || req.SourceRawState == nil {
			return
		}
		var old struct {
			ID, Name, Secret string
			Tags             map[string]string
		}
		if err := json.Unmarshal(req.SourceRawState.JSON, &old); err != nil {
			resp.Diagnostics.AddError("recorder_old state", err.Error())
			return
		}
		tags, _ := types.MapValueFrom(ctx, types.StringType, old.Tags)
		m := thingModel{ID: types.StringValue(old.ID), Name: types.StringValue(old.Name), Tags: tags, Secret: types.StringValue(old.Secret)}
		if old.Tags == nil {
			m.Tags = types.MapNull(types.StringType)
		}
		if old.Secret == "" {
			m.Secret = types.StringNull()
		}
		resp.Diagnostics.Append(resp.TargetState.Set(ctx, m)...)
	}}}
}

type thingModel struct {
	ID     types.String `tfsdk:"id"`
	Name   types.String `tfsdk:"name"`
	Tags   types.Map    `tfsdk:"tags"`
	Secret types.String `tfsdk:"secret"`
}

func (t *thing) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = t.typeName
}

func (*thing) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = rschema.Schema{Attributes: map[string]rschema.Attribute{
		"id":     rschema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"name":   rschema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"tags":   rschema.MapAttribute{ElementType: types.StringType, Optional: true},
		"secret": rschema.StringAttribute{Optional: true, Sensitive: true},
	}}
}

func (*thing) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m thingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	m.ID = types.StringValue("thing-" + m.Name.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, "made-by", []byte(`"recorder"`))...)
}

func (*thing) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m thingModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func (*thing) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m thingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func (*thing) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// info is recorder_info: it echoes its input upper-cased.
type info struct{}

func (*info) Metadata(_ context.Context, _ datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = "recorder_info"
}

func (*info) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dsschema.Schema{Attributes: map[string]dsschema.Attribute{
		"input":  dsschema.StringAttribute{Required: true},
		"output": dsschema.StringAttribute{Computed: true},
	}}
}

func (*info) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m struct {
		Input  types.String `tfsdk:"input"`
		Output types.String `tfsdk:"output"`
	}
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	m.Output = types.StringValue(strings.ToUpper(m.Input.ValueString()))
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

// shout is provider::recorder::shout(s): s upper-cased with an exclamation mark.
type shout struct{}

func (*shout) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "shout"
}

func (*shout) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{Parameters: []function.Parameter{function.StringParameter{Name: "s"}}, Return: function.StringReturn{}}
}

func (*shout) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var s string
	resp.Error = req.Arguments.Get(ctx, &s)
	if resp.Error == nil {
		resp.Error = resp.Result.Set(ctx, strings.ToUpper(s)+"!")
	}
}
