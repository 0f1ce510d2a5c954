package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type helloProvider struct {
	version string
}

type providerModel struct {
	Greeting     types.String `tfsdk:"greeting"`
	GreetingFile types.String `tfsdk:"greeting_file"`
}

func newProvider(version string) func() provider.Provider {
	return func() provider.Provider { return &helloProvider{version: version} }
}

var (
	_ provider.Provider              = (*helloProvider)(nil)
	_ provider.ProviderWithFunctions = (*helloProvider)(nil)
)

func (p *helloProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "hello"
	resp.Version = p.version
}

func (p *helloProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = pschema.Schema{
		Description: "Greets people. oprov's example provider.",
		Attributes: map[string]pschema.Attribute{
			"greeting": pschema.StringAttribute{
				Optional:    true,
				Description: `The word to greet with (default "Hello").`,
			},
			"greeting_file": pschema.StringAttribute{
				Optional:    true,
				Description: "A file holding the word to greet with, read where the provider runs.",
			},
		},
	}
}

func (p *helloProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	greeting := "Hello"
	if !cfg.Greeting.IsNull() && !cfg.Greeting.IsUnknown() {
		greeting = cfg.Greeting.ValueString()
	}
	if f := cfg.GreetingFile.ValueString(); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("greeting_file"), "Cannot read the greeting file", err.Error())
			return
		}
		greeting = strings.TrimSpace(string(b))
	}
	resp.ResourceData = greeting
	resp.DataSourceData = greeting
}

func (p *helloProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &greetingResource{} }}
}

func (p *helloProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &greetingDataSource{} }}
}

func (p *helloProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{func() function.Function { return &greetFunction{} }}
}

func greet(greeting, name string) string { return fmt.Sprintf("%s, %s!", greeting, name) }

// greetingResource is hello_greeting: a greeting kept in state.
type greetingResource struct{ greeting string }

type greetingModel struct {
	ID      types.String `tfsdk:"id"`
	Name    types.String `tfsdk:"name"`
	Message types.String `tfsdk:"message"`
	Delay   types.String `tfsdk:"delay"`
}

func (r *greetingResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_greeting"
}

func (r *greetingResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = rschema.Schema{
		Description: "A greeting for someone.",
		Attributes: map[string]rschema.Attribute{
			"id": rschema.StringAttribute{
				Computed: true, Description: "The greeting's identifier.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": rschema.StringAttribute{
				Required: true, Description: "Who to greet.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"message": rschema.StringAttribute{
				Computed: true, Description: "The greeting.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"delay": rschema.StringAttribute{
				Optional: true, Description: `How long creating the greeting takes, such as "5s" (to show cancellation).`,
			},
		},
	}
}

func (r *greetingResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if g, ok := req.ProviderData.(string); ok {
		r.greeting = g
	}
}

func (r *greetingResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m greetingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d := m.Delay.ValueString(); d != "" {
		wait, err := time.ParseDuration(d)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("delay"), "Invalid delay", err.Error())
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			resp.Diagnostics.AddError("Cancelled", "creating the greeting was cancelled")
			return
		}
	}
	m.ID = types.StringValue("greeting-" + m.Name.ValueString())
	m.Message = types.StringValue(greet(r.greeting, m.Name.ValueString()))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *greetingResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m greetingModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *greetingResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m greetingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *greetingResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

var _ resource.ResourceWithImportState = (*greetingResource)(nil)

// ImportState takes an existing greeting by its id, greeting-NAME.
func (r *greetingResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	name, ok := strings.CutPrefix(req.ID, "greeting-")
	if !ok || name == "" {
		resp.Diagnostics.AddError("Invalid greeting id", fmt.Sprintf("%q is not greeting-NAME", req.ID))
		return
	}
	m := greetingModel{ID: types.StringValue(req.ID), Name: types.StringValue(name),
		Message: types.StringValue(greet(r.greeting, name)), Delay: types.StringNull()}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// greetingDataSource is data.hello_greeting: a greeting computed on read.
type greetingDataSource struct{ greeting string }

type greetingDataModel struct {
	Name    types.String `tfsdk:"name"`
	Message types.String `tfsdk:"message"`
}

func (d *greetingDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_greeting"
}

func (d *greetingDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dsschema.Schema{
		Description: "Computes a greeting without storing it.",
		Attributes: map[string]dsschema.Attribute{
			"name":    dsschema.StringAttribute{Required: true, Description: "Who to greet."},
			"message": dsschema.StringAttribute{Computed: true, Description: "The greeting."},
		},
	}
}

func (d *greetingDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if g, ok := req.ProviderData.(string); ok {
		d.greeting = g
	}
}

func (d *greetingDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m greetingDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	m.Message = types.StringValue(greet(d.greeting, m.Name.ValueString()))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// greetFunction is provider::hello::greet(name): a greeting as a pure function.
type greetFunction struct{}

func (f *greetFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "greet"
}

func (f *greetFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary:    "Greets someone",
		Parameters: []function.Parameter{function.StringParameter{Name: "name", Description: "Who to greet."}},
		Return:     function.StringReturn{},
	}
}

func (f *greetFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var name string
	resp.Error = req.Arguments.Get(ctx, &name)
	if resp.Error != nil {
		return
	}
	resp.Error = resp.Result.Set(ctx, greet("Hello", name))
}
