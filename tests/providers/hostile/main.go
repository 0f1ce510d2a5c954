// Command terraform-provider-hostile is a test provider for oprov's sandbox. Its one resource,
// hostile_probe, does on create what a provider should not be able to do under the default
// sandbox (read a private key, write a shell's start-up file, connect to a port nobody named,
// run a shell, trace its parent) and what a sandbox block allows (read a declared path, connect to
// a declared port), and reports what it saw of each in its computed attribute report: "ok: ..."
// or "refused: ERROR". It also reports which of the variables named in env it can see. Each
// refusal is logged on stderr, and with fail_on_refusal = true it is an error diagnostic too.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
	"golang.org/x/sys/unix"
)

func main() {
	server := providerserver.NewProtocol6(&hostile{})
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			MagicCookieKey:   "TF_PLUGIN_MAGIC_COOKIE",
			MagicCookieValue: "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
		},
		VersionedPlugins: map[int]plugin.PluginSet{6: {"provider": &tf6server.GRPCProviderPlugin{
			GRPCProvider: func() tfprotov6.ProviderServer { return server() },
			Name:         "example.com/acme/hostile",
		}}},
		GRPCServer: plugin.DefaultGRPCServer,
	})
}

type hostile struct{}

func (*hostile) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "hostile"
}
func (*hostile) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse)          {}
func (*hostile) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}
func (*hostile) DataSources(context.Context) []func() datasource.DataSource                        { return nil }
func (*hostile) Functions(context.Context) []func() function.Function                              { return nil }
func (*hostile) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &probe{} }}
}

type probe struct{}

type probeModel struct {
	ID           types.String `tfsdk:"id"`
	ReadPath     types.String `tfsdk:"read_path"`
	WritePath    types.String `tfsdk:"write_path"`
	Connect      types.String `tfsdk:"connect"`
	Exec         types.String `tfsdk:"exec"`
	Ptrace       types.Bool   `tfsdk:"ptrace"`
	ReadAllowed  types.String `tfsdk:"read_allowed"`
	ConnectAllow types.String `tfsdk:"connect_allowed"`
	Env          types.List   `tfsdk:"env"`
	Fail         types.Bool   `tfsdk:"fail_on_refusal"`
	Report       types.Map    `tfsdk:"report"`
}

func (*probe) Metadata(_ context.Context, _ resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = "hostile_probe"
}

func (*probe) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	opt := func() rschema.StringAttribute { return rschema.StringAttribute{Optional: true} }
	resp.Schema = rschema.Schema{Attributes: map[string]rschema.Attribute{
		"id":              rschema.StringAttribute{Computed: true},
		"read_path":       opt(),
		"write_path":      opt(),
		"connect":         opt(),
		"exec":            opt(),
		"ptrace":          rschema.BoolAttribute{Optional: true},
		"read_allowed":    opt(),
		"connect_allowed": opt(),
		"env":             rschema.ListAttribute{Optional: true, ElementType: types.StringType},
		"fail_on_refusal": rschema.BoolAttribute{Optional: true},
		"report":          rschema.MapAttribute{Computed: true, ElementType: types.StringType},
	}}
}

func (*probe) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m probeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	report := map[string]string{}
	if p := m.ReadPath.ValueString(); p != "" {
		report["read"] = readFile(p)
	}
	if p := m.ReadAllowed.ValueString(); p != "" {
		report["read_allowed"] = readFile(p)
	}
	if p := m.WritePath.ValueString(); p != "" {
		report["write"] = outcome("appended", appendTo(p))
	}
	if a := m.Connect.ValueString(); a != "" {
		report["connect"] = dial(a)
	}
	if a := m.ConnectAllow.ValueString(); a != "" {
		report["connect_allowed"] = dial(a)
	}
	if p := m.Exec.ValueString(); p != "" {
		out, err := exec.Command(p, "-c", "echo ran").Output()
		report["exec"] = outcome(strings.TrimSpace(string(out)), err)
	}
	if m.Ptrace.ValueBool() {
		report["ptrace"] = traceParent()
	}
	var names []string
	resp.Diagnostics.Append(m.Env.ElementsAs(ctx, &names, true)...)
	for _, n := range names {
		if _, ok := os.LookupEnv(n); ok {
			report["env:"+n] = "set"
		} else {
			report["env:"+n] = "absent"
		}
	}
	for _, k := range sortedKeys(report) {
		if v := report[k]; strings.HasPrefix(v, "refused: ") {
			// As a provider logs what went wrong: oprov reads its stderr.
			fmt.Fprintf(os.Stderr, "hostile: %s %s\n", k, v)
			if m.Fail.ValueBool() {
				resp.Diagnostics.AddError("hostile_probe could not "+k, strings.TrimPrefix(v, "refused: "))
			}
		}
	}
	m.ID = types.StringValue("probe")
	var d = resp.Diagnostics
	m.Report, d = types.MapValueFrom(ctx, types.StringType, report)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func outcome(ok string, err error) string {
	if err != nil {
		return "refused: " + err.Error()
	}
	return "ok: " + ok
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	return outcome(strings.TrimSpace(string(b)), err)
}

func appendTo(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString("# written by terraform-provider-hostile\n")
	return errors.Join(err, f.Close())
}

func dial(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return outcome("", err)
	}
	c.Close()
	return "ok: connected"
}

// traceParent seizes the parent process with ptrace (which does not stop it) from a thread that
// then ends, which detaches it again.
func traceParent() string {
	res := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, and the tracee is let go
		res <- unix.PtraceSeize(os.Getppid())
	}()
	err := <-res
	return outcome(fmt.Sprintf("seized pid %d", os.Getppid()), err)
}

func (*probe) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (*probe) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.Append(resp.State.Set(ctx, req.Plan)...)
}

func (*probe) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
