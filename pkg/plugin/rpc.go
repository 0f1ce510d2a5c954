package plugin

import (
	"context"

	"google.golang.org/grpc"

	"github.com/oprov/oprov/pkg/plugin/tfplugin5"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// The calls oprov itself makes to a provider, by the names they have on the wire. The messages
// are oprov's own subset of the protocol (proto/), registered under a proto package of their own.
const (
	methodSchema6 = "/tfplugin6.Provider/GetProviderSchema"
	methodStop6   = "/tfplugin6.Provider/StopProvider"
	methodSchema5 = "/tfplugin5.Provider/GetSchema"
	methodStop5   = "/tfplugin5.Provider/Stop"
)

// client6 makes protocol 6 calls on a connection.
type client6 struct{ cc grpc.ClientConnInterface }

func (c client6) GetProviderSchema(ctx context.Context, in *tfplugin6.GetProviderSchema_Request, opts ...grpc.CallOption) (*tfplugin6.GetProviderSchema_Response, error) {
	out := new(tfplugin6.GetProviderSchema_Response)
	return out, c.cc.Invoke(ctx, methodSchema6, in, out, opts...)
}

func (c client6) StopProvider(ctx context.Context, in *tfplugin6.StopProvider_Request, opts ...grpc.CallOption) (*tfplugin6.StopProvider_Response, error) {
	out := new(tfplugin6.StopProvider_Response)
	return out, c.cc.Invoke(ctx, methodStop6, in, out, opts...)
}

// client5 makes protocol 5 calls on a connection.
type client5 struct{ cc grpc.ClientConnInterface }

func (c client5) GetSchema(ctx context.Context, in *tfplugin5.GetProviderSchema_Request, opts ...grpc.CallOption) (*tfplugin5.GetProviderSchema_Response, error) {
	out := new(tfplugin5.GetProviderSchema_Response)
	return out, c.cc.Invoke(ctx, methodSchema5, in, out, opts...)
}

func (c client5) Stop(ctx context.Context, in *tfplugin5.Stop_Request, opts ...grpc.CallOption) (*tfplugin5.Stop_Response, error) {
	out := new(tfplugin5.Stop_Response)
	return out, c.cc.Invoke(ctx, methodStop5, in, out, opts...)
}
