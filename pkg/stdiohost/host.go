// Package stdiohost hosts a provider written against oprov's stdio protocol
// (docs/stdio-protocol.md) behind plugin protocol 6: it runs the program, speaks JSON-RPC 2.0 to
// it over stdin and stdout, and does on its behalf what the protocol leaves to oprov (type
// checks, planning, unknown values, state upgrades, diagnostics).
package stdiohost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

// protocolVersion is the stdio protocol version oprov speaks.
const protocolVersion = "1"

// Host is one provider instance: one program, started on the first call.
type Host struct {
	dir string
	// workDir is the program's working directory: "" for the host's own (tofu's, when serving).
	workDir string
	man     *Manifest
	log     io.Writer
	agent   string // oprov's version, told to the program

	once   sync.Once
	proc   *process
	info   *initResult
	schema *schema
	err    error
}

// newHost is a host for the stdio provider in dir; the program's stderr goes to log.
func newHost(dir string, log io.Writer) (*Host, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	return &Host{dir: dir, man: m, log: log}, nil
}

// Serve serves plugin protocol 6 with go-plugin's handshake on this process's stdout until
// tofu is done, then ends the program.
func Serve(dir, agent string) error {
	h, err := newHost(dir, stderrNow{})
	if err != nil {
		return err
	}
	h.agent = agent
	defer h.Close()
	// The program starts while go-plugin sets up, not on tofu's first call: the two overlap.
	go h.ready(context.Background())
	return tf6server.Serve("registry.opentofu.org/oprov/"+h.man.Type, func() tfprotov6.ProviderServer { return h },
		tf6server.WithoutLogStderrOverride())
}

// stderrNow writes to whatever os.Stderr is when written to (go-plugin swaps it).
type stderrNow struct{}

func (stderrNow) Write(b []byte) (int, error) { return os.Stderr.Write(b) }

// Close ends the program, if it was started.
func (h *Host) Close() {
	if h.proc != nil {
		h.proc.close(3 * time.Second)
	}
}

// ready starts the program and initializes it once; every call goes through here.
func (h *Host) ready(ctx context.Context) (*schema, error) {
	h.once.Do(func() { h.err = h.start(ctx) })
	return h.schema, h.err
}

func (h *Host) start(ctx context.Context) error {
	p, err := startProcess(h.dir, h.workDir, h.man, h.log)
	if err != nil {
		return err
	}
	h.proc = p
	var res initResult
	params := map[string]any{"protocol_version": protocolVersion, "oprov_version": h.agent}
	if err := p.call(ctx, "initialize", params, &res); err != nil {
		return fmt.Errorf("initializing %s: %w", p.name, err)
	}
	if res.ProtocolVersion != protocolVersion {
		return fmt.Errorf("%s speaks protocol version %q; this oprov speaks %q", p.name, res.ProtocolVersion, protocolVersion)
	}
	s, err := checkSchema(h.man.Type, res.Schema)
	if err != nil {
		return fmt.Errorf("%s has an invalid schema: %w", p.name, err)
	}
	h.info, h.schema = &res, s
	p.concurrent = res.Capabilities.Concurrent
	return nil
}

// call sends one method to the program and reads the fields of its result.
func (h *Host) call(ctx context.Context, method string, params any, out any) error {
	return h.proc.call(ctx, method, params, out)
}

func (h *Host) startDiags(err error) []*tfprotov6.Diagnostic {
	return diags(err, "Stdio provider "+h.man.Type+" cannot start")
}

func (h *Host) GetMetadata(ctx context.Context, _ *tfprotov6.GetMetadataRequest) (*tfprotov6.GetMetadataResponse, error) {
	s, err := h.ready(ctx)
	if err != nil {
		return &tfprotov6.GetMetadataResponse{Diagnostics: h.startDiags(err)}, nil
	}
	resp := &tfprotov6.GetMetadataResponse{ServerCapabilities: &tfprotov6.ServerCapabilities{}}
	for n := range s.resources {
		resp.Resources = append(resp.Resources, tfprotov6.ResourceMetadata{TypeName: n})
	}
	for n := range s.data {
		resp.DataSources = append(resp.DataSources, tfprotov6.DataSourceMetadata{TypeName: n})
	}
	for n := range s.functions {
		resp.Functions = append(resp.Functions, tfprotov6.FunctionMetadata{Name: n})
	}
	return resp, nil
}

func (h *Host) GetProviderSchema(ctx context.Context, _ *tfprotov6.GetProviderSchemaRequest) (*tfprotov6.GetProviderSchemaResponse, error) {
	s, err := h.ready(ctx)
	if err != nil {
		return &tfprotov6.GetProviderSchemaResponse{Diagnostics: h.startDiags(err)}, nil
	}
	resp := &tfprotov6.GetProviderSchemaResponse{
		ServerCapabilities: &tfprotov6.ServerCapabilities{},
		Provider:           s.provider.proto(),
		ResourceSchemas:    map[string]*tfprotov6.Schema{},
		DataSourceSchemas:  map[string]*tfprotov6.Schema{},
		Functions:          map[string]*tfprotov6.Function{},
	}
	for n, b := range s.resources {
		resp.ResourceSchemas[n] = b.proto()
	}
	for n, b := range s.data {
		resp.DataSourceSchemas[n] = b.proto()
	}
	for n, f := range s.functions {
		resp.Functions[n] = f.proto
	}
	return resp, nil
}

func (h *Host) GetResourceIdentitySchemas(context.Context, *tfprotov6.GetResourceIdentitySchemasRequest) (*tfprotov6.GetResourceIdentitySchemasResponse, error) {
	return &tfprotov6.GetResourceIdentitySchemasResponse{IdentitySchemas: map[string]*tfprotov6.ResourceIdentitySchema{}}, nil
}

func (h *Host) GetFunctions(ctx context.Context, _ *tfprotov6.GetFunctionsRequest) (*tfprotov6.GetFunctionsResponse, error) {
	s, err := h.ready(ctx)
	if err != nil {
		return &tfprotov6.GetFunctionsResponse{Diagnostics: h.startDiags(err)}, nil
	}
	resp := &tfprotov6.GetFunctionsResponse{Functions: map[string]*tfprotov6.Function{}}
	for n, f := range s.functions {
		resp.Functions[n] = f.proto
	}
	return resp, nil
}

func (h *Host) ValidateProviderConfig(ctx context.Context, req *tfprotov6.ValidateProviderConfigRequest) (*tfprotov6.ValidateProviderConfigResponse, error) {
	s, err := h.ready(ctx)
	if err != nil {
		return &tfprotov6.ValidateProviderConfigResponse{Diagnostics: h.startDiags(err)}, nil
	}
	return &tfprotov6.ValidateProviderConfigResponse{PreparedConfig: req.Config,
		Diagnostics: h.validate(ctx, "provider", "", s.provider, req.Config)}, nil
}

func (h *Host) ConfigureProvider(ctx context.Context, req *tfprotov6.ConfigureProviderRequest) (*tfprotov6.ConfigureProviderResponse, error) {
	s, err := h.ready(ctx)
	if err != nil {
		return &tfprotov6.ConfigureProviderResponse{Diagnostics: h.startDiags(err)}, nil
	}
	cfg, err := decodeDV(req.Config, s.provider.ty)
	if err != nil {
		return &tfprotov6.ConfigureProviderResponse{Diagnostics: diags(err, "Reading the provider configuration")}, nil
	}
	j, err := toJSON(cfg, false)
	if err == nil {
		err = h.call(ctx, "configure", map[string]any{"config": j}, nil)
	}
	return &tfprotov6.ConfigureProviderResponse{Diagnostics: diags(err, "Configuring stdio provider "+h.man.Type)}, nil
}

func (h *Host) StopProvider(context.Context, *tfprotov6.StopProviderRequest) (*tfprotov6.StopProviderResponse, error) {
	return &tfprotov6.StopProviderResponse{}, nil
}

// validate runs the optional validate hook, with unknowns as {"$unknown": true}.
func (h *Host) validate(ctx context.Context, kind, typ string, b *block, dv *tfprotov6.DynamicValue) []*tfprotov6.Diagnostic {
	if !h.info.Capabilities.Validate {
		return nil
	}
	v, err := decodeDV(dv, b.ty)
	if err != nil {
		return diags(err, "Reading the configuration")
	}
	j, err := toJSON(v, true)
	if err == nil {
		err = h.call(ctx, "validate", map[string]any{"kind": kind, "type": typ, "config": j}, nil)
	}
	return diags(err, "Validating "+kind+" "+typ)
}

// stateResult is the result of create, read, update, import, read_data and upgrade.
type stateResult struct {
	State json.RawMessage `json:"state"`
}
