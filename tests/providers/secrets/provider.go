package main

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	eschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
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

type secretsProvider struct{}

var (
	_ provider.ProviderWithFunctions          = &secretsProvider{}
	_ provider.ProviderWithEphemeralResources = &secretsProvider{}
)

func (*secretsProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "secrets"
}

// Schema: a sensitive token.
func (*secretsProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = pschema.Schema{Attributes: map[string]pschema.Attribute{
		"token": pschema.StringAttribute{Optional: true, Sensitive: true},
	}}
}

func (*secretsProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var token types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("token"), &token)...)
	saw("provider-config", token.ValueString(), secretProviderConfig)
}

func (*secretsProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &vault{} }, func() resource.Resource { return &old{} }}
}

func (*secretsProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &lookup{} }}
}

func (*secretsProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{func() ephemeral.EphemeralResource { return &token{} }}
}

func (*secretsProvider) Functions(context.Context) []func() function.Function {
	return []func() function.Function{func() function.Function { return &reveal{} }}
}

// vault is secrets_vault: a secret in a sensitive attribute, two write-only attributes, a
// sensitive dynamic attribute, a list of blocks with a sensitive attribute, a computed sensitive
// attribute it makes, and private state. It takes the state of secrets_old moved to it.
type vault struct{}

var _ resource.ResourceWithMoveState = &vault{}

type credential struct {
	Name   types.String `tfsdk:"name"`
	Secret types.String `tfsdk:"secret"`
}

type vaultModel struct {
	ID         types.String  `tfsdk:"id"`
	Name       types.String  `tfsdk:"name"`
	Note       types.String  `tfsdk:"note"`
	Password   types.String  `tfsdk:"password"`
	WOPassword types.String  `tfsdk:"wo_password"`
	WOToken    types.String  `tfsdk:"wo_token"`
	Blob       types.Dynamic `tfsdk:"blob"`
	Generated  types.String  `tfsdk:"generated"`
	Credential []credential  `tfsdk:"credential"`
}

func (*vault) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = "secrets_vault"
}

func (*vault) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = rschema.Schema{
		Attributes: map[string]rschema.Attribute{
			"id":          rschema.StringAttribute{Computed: true, PlanModifiers: keep},
			"name":        rschema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"note":        rschema.StringAttribute{Optional: true},
			"password":    rschema.StringAttribute{Optional: true, Sensitive: true},
			"wo_password": rschema.StringAttribute{Optional: true, WriteOnly: true},
			"wo_token":    rschema.StringAttribute{Optional: true, WriteOnly: true},
			"blob":        rschema.DynamicAttribute{Optional: true, Sensitive: true},
			"generated":   rschema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep},
		},
		Blocks: map[string]rschema.Block{
			"credential": rschema.ListNestedBlock{NestedObject: rschema.NestedBlockObject{Attributes: map[string]rschema.Attribute{
				"name":   rschema.StringAttribute{Required: true},
				"secret": rschema.StringAttribute{Required: true, Sensitive: true},
			}}},
		},
	}
}

// received notes the secrets of a plan (and the write-only ones of its configuration) that
// reached the provider.
func (m *vaultModel) received(ctx context.Context, config vaultModel) {
	saw("sensitive-attr", m.Password.ValueString(), secretSensitive)
	saw("write-only", config.WOPassword.ValueString(), secretWriteOnly)
	saw("ephemeral-result", config.WOToken.ValueString(), secretEphemeralResult)
	if !m.Blob.IsNull() && !m.Blob.IsUnknown() {
		saw("dynamic-attr", m.Blob.UnderlyingValue().String(), secretDynamic)
	}
	for _, c := range m.Credential {
		saw("nested-block", c.Secret.ValueString(), secretNestedBlock)
	}
}

func (*vault) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m, config vaultModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.received(ctx, config)
	m.ID = types.StringValue("vault-" + m.Name.ValueString())
	m.Generated = types.StringValue(secretGenerated)
	m.WOPassword, m.WOToken = types.StringNull(), types.StringNull()
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, "token", []byte(`"`+secretPrivate+`"`))...)
}

func (*vault) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m vaultModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	saw("generated", m.Generated.ValueString(), secretGenerated)
	p, diags := req.Private.GetKey(ctx, "token")
	resp.Diagnostics.Append(diags...)
	saw("private-state", string(p), secretPrivate)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func (*vault) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m, config vaultModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.received(ctx, config)
	m.WOPassword, m.WOToken = types.StringNull(), types.StringNull()
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func (*vault) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// MoveState takes secrets_old's state: its key becomes the password, its private state the
// vault's.
func (*vault) MoveState(context.Context) []resource.StateMover {
	return []resource.StateMover{{StateMover: func(ctx context.Context, req resource.MoveStateRequest, resp *resource.MoveStateResponse) {
		if req.SourceTypeName != "secrets_old" || req.SourceRawState == nil {
			return
		}
		var src struct{ ID, Name, Key string }
		if err := json.Unmarshal(req.SourceRawState.JSON, &src); err != nil {
			resp.Diagnostics.AddError("secrets_old state", err.Error())
			return
		}
		saw("moved-source", src.Key, secretMovedSource)
		p, diags := req.SourcePrivate.GetKey(ctx, "origin")
		resp.Diagnostics.Append(diags...)
		saw("moved-private", string(p), secretMovedPrivate)
		m := vaultModel{ID: types.StringValue(src.ID), Name: types.StringValue(src.Name), Note: types.StringNull(),
			Password: types.StringValue(src.Key), WOPassword: types.StringNull(), WOToken: types.StringNull(),
			Blob: types.DynamicNull(), Generated: types.StringValue(secretGenerated), Credential: []credential{}}
		resp.Diagnostics.Append(resp.TargetState.Set(ctx, m)...)
		if p != nil && resp.TargetPrivate != nil {
			resp.Diagnostics.Append(resp.TargetPrivate.SetKey(ctx, "origin", p)...)
		}
	}}}
}

// old is secrets_old: a sensitive key and private state; configurations move it to secrets_vault.
type old struct{}

type oldModel struct {
	ID   types.String `tfsdk:"id"`
	Name types.String `tfsdk:"name"`
	Key  types.String `tfsdk:"key"`
}

func (*old) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = "secrets_old"
}

func (*old) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = rschema.Schema{Attributes: map[string]rschema.Attribute{
		"id":   rschema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"name": rschema.StringAttribute{Required: true},
		"key":  rschema.StringAttribute{Required: true, Sensitive: true},
	}}
}

func (*old) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m oldModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	m.ID = types.StringValue("vault-" + m.Name.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, "origin", []byte(`"`+secretMovedPrivate+`"`))...)
}

func (*old) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m oldModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func (*old) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m oldModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func (*old) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// lookup is data secrets_lookup: a sensitive value it makes.
type lookup struct{}

func (*lookup) Metadata(_ context.Context, _ datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = "secrets_lookup"
}

func (*lookup) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dsschema.Schema{Attributes: map[string]dsschema.Attribute{
		"name":  dsschema.StringAttribute{Required: true},
		"value": dsschema.StringAttribute{Computed: true, Sensitive: true},
	}}
}

func (*lookup) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var name types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("name"), &name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("value"), secretDataSource)...)
}

// token is ephemeral secrets_token: a sensitive seed in, a secret result and private state out.
type token struct{}

var _ ephemeral.EphemeralResourceWithClose = &token{}

func (*token) Metadata(_ context.Context, _ ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = "secrets_token"
}

func (*token) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	resp.Schema = eschema.Schema{Attributes: map[string]eschema.Attribute{
		"seed":  eschema.StringAttribute{Required: true, Sensitive: true},
		"value": eschema.StringAttribute{Computed: true, Sensitive: true},
	}}
}

func (*token) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var seed types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("seed"), &seed)...)
	saw("ephemeral-config", seed.ValueString(), secretEphemeralConf)
	resp.Diagnostics.Append(resp.Result.SetAttribute(ctx, path.Root("seed"), seed)...)
	resp.Diagnostics.Append(resp.Result.SetAttribute(ctx, path.Root("value"), secretEphemeralResult)...)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, "lease", []byte(`"`+secretEphemeralPriv+`"`))...)
}

func (*token) Close(ctx context.Context, req ephemeral.CloseRequest, resp *ephemeral.CloseResponse) {
	p, diags := req.Private.GetKey(ctx, "lease")
	resp.Diagnostics.Append(diags...)
	saw("ephemeral-private", string(p), secretEphemeralPriv)
}

// reveal is provider::secrets::reveal(s): s, then "+" and a secret of its own.
type reveal struct{}

func (*reveal) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "reveal"
}

func (*reveal) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{Parameters: []function.Parameter{function.StringParameter{Name: "s"}}, Return: function.StringReturn{}}
}

func (*reveal) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var s string
	if resp.Error = req.Arguments.Get(ctx, &s); resp.Error == nil {
		saw("function-arg", s, secretFunctionArg)
		resp.Error = resp.Result.Set(ctx, s+"+"+secretFunctionResult)
	}
}
