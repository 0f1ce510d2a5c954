package main

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/provider"
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

func (*recorder) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}

func (*recorder) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}

func (*recorder) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &thing{} }}
}

func (*recorder) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &info{} }}
}

func (*recorder) Functions(context.Context) []func() function.Function {
	return []func() function.Function{func() function.Function { return &shout{} }}
}

// thing is recorder_thing: a name, tags, a sensitive secret, and an id derived from the name.
type thing struct{}

type thingModel struct {
	ID     types.String `tfsdk:"id"`
	Name   types.String `tfsdk:"name"`
	Tags   types.Map    `tfsdk:"tags"`
	Secret types.String `tfsdk:"secret"`
}

func (*thing) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = "recorder_thing"
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
