package plugin

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// echoProvider answers GetProviderSchema with the metadata value it got back in a header, a
// trailer and the response, and fails StopProvider with a status, so that a proxy's fidelity shows.
type echoProvider struct{}

// echoService serves echoProvider under protocol 6's wire names; GetMetadata is left out, so it
// answers Unimplemented.
var echoService = grpc.ServiceDesc{
	ServiceName: "tfplugin6.Provider",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "GetProviderSchema", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(tfplugin6.GetProviderSchema_Request)
			if err := dec(in); err != nil {
				return nil, err
			}
			return echoProvider{}.GetProviderSchema(ctx, in)
		}},
		{MethodName: "StopProvider", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(tfplugin6.StopProvider_Request)
			if err := dec(in); err != nil {
				return nil, err
			}
			return echoProvider{}.StopProvider(ctx, in)
		}},
	},
}

func (echoProvider) GetProviderSchema(ctx context.Context, _ *tfplugin6.GetProviderSchema_Request) (*tfplugin6.GetProviderSchema_Response, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get("x-test")
	if len(v) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no x-test metadata")
	}
	grpc.SetHeader(ctx, metadata.Pairs("x-header", v[0]))
	grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", v[0]))
	return &tfplugin6.GetProviderSchema_Response{ResourceSchemas: map[string]*tfplugin6.Schema{v[0]: {Version: 7}}}, nil
}

func (echoProvider) StopProvider(context.Context, *tfplugin6.StopProvider_Request) (*tfplugin6.StopProvider_Response, error) {
	return nil, status.Error(codes.FailedPrecondition, "cannot stop")
}

func dialUnix(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient("unix://"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestProxyIsTransparent: a call through the proxy, with or without middleware, reaches the
// provider with its metadata and comes back with the provider's header, trailer, message and error
// status; an unknown method's Unimplemented status passes as well; Stop removes the socket.
func TestProxyIsTransparent(t *testing.T) {
	for name, mw := range map[string]Middleware{"pass-through": nil, "with middleware": &recorder{}} {
		t.Run(name, func(t *testing.T) { proxyFidelity(t, mw) })
	}
}

func proxyFidelity(t *testing.T, mw Middleware) {
	sock := filepath.Join(t.TempDir(), "p.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&echoService, echoProvider{})
	go srv.Serve(ln)
	defer srv.Stop()

	proxy, err := startProxy("", &Provider{conn: dialUnix(t, sock), Protocol: 6}, mw)
	if err != nil {
		t.Fatal(err)
	}
	conn := dialUnix(t, proxy.socket)
	client := client6{conn}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-test", "relayed")
	var header, trailer metadata.MD
	resp, err := client.GetProviderSchema(ctx, &tfplugin6.GetProviderSchema_Request{}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ResourceSchemas["relayed"].GetVersion() != 7 {
		t.Errorf("response %v", resp)
	}
	if header.Get("x-header")[0] != "relayed" || len(trailer.Get("x-trailer")) != 1 {
		t.Errorf("header %v, trailer %v", header, trailer)
	}
	_, err = client.StopProvider(ctx, &tfplugin6.StopProvider_Request{})
	if s := status.Convert(err); s.Code() != codes.FailedPrecondition || s.Message() != "cannot stop" {
		t.Errorf("StopProvider through the proxy: %v", err)
	}
	err = conn.Invoke(ctx, "/tfplugin6.Provider/GetMetadata", &tfplugin6.GetMetadata_Request{}, new(tfplugin6.GetMetadata_Response))
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unimplemented method: %v", err)
	}
	proxy.Stop()
	if _, err := net.Dial("unix", proxy.socket); err == nil {
		t.Error("the proxy still listens after Stop")
	}
}
