// Command terraform-provider-recorder is a test provider for oprov's middleware: a resource with a
// sensitive attribute (importable, movable from recorder_old, with private data), a resource
// whose list of blocks holds a dynamic attribute (recorder_stack), a data source and a function,
// served over plugin protocol 6, that appends
// the name of every gRPC call it serves to the file $RECORDER_LOG. Tests count those lines against
// oprov's audit trail.
package main

import (
	"context"
	"os"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
	"google.golang.org/grpc"
)

const address = "example.com/acme/recorder"

func main() {
	server := providerserver.NewProtocol6(&recorder{})
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			MagicCookieKey:   "TF_PLUGIN_MAGIC_COOKIE",
			MagicCookieValue: "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
		},
		VersionedPlugins: map[int]plugin.PluginSet{6: {"provider": &tf6server.GRPCProviderPlugin{
			GRPCProvider: func() tfprotov6.ProviderServer { return withStack{server()} },
			Name:         address,
		}}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(record))...)
		},
	})
}

// record appends each provider call's method to $RECORDER_LOG (go-plugin's own services are not
// provider calls).
func record(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if path := os.Getenv("RECORDER_LOG"); path != "" && len(info.FullMethod) > 19 && info.FullMethod[:19] == "/tfplugin6.Provider" {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			f.WriteString(info.FullMethod + "\n")
			f.Close()
		}
	}
	return handler(ctx, req)
}
