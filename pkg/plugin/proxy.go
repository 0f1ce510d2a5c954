package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/protocol"
)

// Call is one unary call passing through a proxy: the full gRPC method name and the request as
// it came from tofu, undecoded.
type Call struct {
	Method   string // e.g. /tfplugin6.Provider/PlanResourceChange
	Protocol int    // 5 or 6
	Request  []byte
}

// RPC is the method's own name: PlanResourceChange.
func (c *Call) RPC() string { return c.Method[strings.LastIndexByte(c.Method, '/')+1:] }

// Next forwards a (possibly changed) request to the provider and gives its response, undecoded.
type Next func(ctx context.Context, request []byte) ([]byte, error)

// Middleware sees every unary provider call. It may forward it (next), answer it itself, or change
// the response; what it returns goes back to tofu byte for byte. Done reports calls that pass
// through unseen (streams); Own reports calls oprov itself made to the provider (StopProvider when
// the group stops), so that a record of calls can be complete.
type Middleware interface {
	Unary(ctx context.Context, call *Call, next Next) ([]byte, error)
	Done(method string, took time.Duration, err error)
	Own(method string, took time.Duration, err error)
}

// Gate is what a Middleware may also do for streaming calls (InvokeAction, WriteStateBytes): see
// the first request message before the provider does, and end the call with an error instead.
type Gate interface {
	Gate(ctx context.Context, call *Call) error
}

// rawMsg is a gRPC message kept as its wire bytes.
type rawMsg struct{ b []byte }

// rawCodec moves messages as bytes: the proxy passes through every call and field, including ones
// oprov's stubs do not know. Typed messages (a server's own services) are still protobuf. Its
// name is "proto" so the content type on the wire is unchanged.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *rawMsg:
		return m.b, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("proxy: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case *rawMsg:
		m.b = append(m.b[:0], data...) // gRPC may reuse data once this returns
		return nil
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("proxy: cannot unmarshal into %T", v)
}

// maxMessage is the largest message the proxy passes, as OpenTofu allows its providers.
const maxMessage = 256 << 20

// Proxy sits between tofu and one running provider: tofu reattaches to the proxy's socket, and
// every call and stream is forwarded to the provider as raw bytes, through the middleware for
// unary provider calls.
type Proxy struct {
	p      *Provider
	mw     Middleware
	dir    string
	socket string
	srv    *grpc.Server
}

// startProxy serves a proxy for p on a unix socket in a private directory (mode 0700) made in
// base, the run's directory: never inside the provider's own, its TMPDIR, which a sandbox lets it
// write, and where it could put a socket of its own in the proxy's place, past audit and rules.
func startProxy(base string, p *Provider, mw Middleware) (*Proxy, error) {
	dir, err := os.MkdirTemp(base, "proxy-")
	if err != nil {
		return nil, err
	}
	x := &Proxy{p: p, mw: mw, dir: dir, socket: filepath.Join(dir, "provider.sock")}
	if mw != nil {
		p.onAsk = mw.Own
	}
	l, err := net.Listen("unix", x.socket)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("proxy for %s: %w", p.Path, err)
	}
	x.srv = x.server()
	go x.srv.Serve(guardPeers(l, p.Path)) // only tofu reaches a proxy (peercred.go)
	return x, nil
}

// server is the gRPC server that forwards every call it gets to the provider.
func (x *Proxy) server() *grpc.Server {
	return grpc.NewServer(
		grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(x.handle),
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage),
	)
}

// ReattachConfig hands the proxy to tofu in the provider's place.
func (x *Proxy) ReattachConfig() Reattach {
	r := x.p.ReattachConfig()
	r.Addr = ReattachAddr{Network: "unix", String: x.socket}
	return r
}

// Stop ends the proxy's calls and removes its socket.
func (x *Proxy) Stop() {
	done := make(chan struct{})
	go func() { x.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		x.srv.Stop()
	}
	os.RemoveAll(x.dir)
}

var callOpts = []grpc.CallOption{grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)}

// handle forwards one call or stream, whatever its service. A remote provider's call that ends
// because the connection did says so, naming the remote.
func (x *Proxy) handle(srv any, stream grpc.ServerStream) error {
	if x.p.remote != nil {
		x.p.remote.calls.Add(1)
	}
	err := x.forward(srv, stream)
	if x.p.remote != nil {
		err = x.p.remote.lost(err)
	}
	return err
}

// forward forwards one call or stream.
func (x *Proxy) forward(_ any, stream grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return errors.New("proxy: no method")
	}
	ctx := stream.Context()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	if x.mw != nil && isProviderService(method) {
		v, m := protocol.Lookup(method)
		if m == nil {
			// Fail closed: audit, rules and recording cannot judge what the model lacks.
			return status.Errorf(codes.Unimplemented, "oprov: %q is not a method of plugin protocol %d as oprov models it (%d.%d): its audit, rules and recording cannot see it, so it is refused; upgrade oprov",
				method, v.Major, v.Major, v.Minor)
		}
		if !m.ClientStream && !m.ServerStream {
			return x.unary(ctx, method, stream)
		}
	}
	start := time.Now()
	var err error
	if g, ok := x.mw.(Gate); ok && isProviderService(method) {
		err = x.gated(ctx, g, method, stream)
	} else {
		err = x.pump(ctx, method, stream, nil)
	}
	if x.mw != nil && isProviderService(method) {
		x.mw.Done(method, time.Since(start), err)
	}
	return err
}

// unary passes one request through the middleware and sends back what it gives.
func (x *Proxy) unary(ctx context.Context, method string, stream grpc.ServerStream) error {
	var req rawMsg
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	var header, trailer metadata.MD
	next := func(ctx context.Context, b []byte) ([]byte, error) {
		var resp rawMsg
		opts := append([]grpc.CallOption{grpc.Header(&header), grpc.Trailer(&trailer)}, callOpts...)
		err := x.p.conn.Invoke(ctx, method, &rawMsg{b: b}, &resp, opts...)
		return resp.b, err
	}
	resp, err := x.mw.Unary(ctx, &Call{Method: method, Protocol: x.p.Protocol, Request: req.b}, next)
	stream.SetTrailer(trailer)
	if err != nil {
		return err
	}
	if len(header) > 0 {
		stream.SendHeader(header)
	}
	return stream.SendMsg(&rawMsg{b: resp})
}

// gated passes a stream's first request message to the gate, then forwards the stream.
func (x *Proxy) gated(ctx context.Context, g Gate, method string, in grpc.ServerStream) error {
	var first rawMsg
	if err := in.RecvMsg(&first); err != nil {
		if errors.Is(err, io.EOF) { // no request at all: nothing to judge
			return x.pump(ctx, method, in, nil)
		}
		return err
	}
	if err := g.Gate(ctx, &Call{Method: method, Protocol: x.p.Protocol, Request: first.b}); err != nil {
		return err
	}
	return x.pump(ctx, method, in, &first)
}

// pump forwards a call of any shape (unary or streaming either way) message by message; first,
// when given, is a request already received from tofu.
func (x *Proxy) pump(ctx context.Context, method string, in grpc.ServerStream, first *rawMsg) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out, err := x.p.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, callOpts...)
	if err != nil {
		return err
	}
	if first != nil {
		if err := out.SendMsg(first); err != nil {
			return err
		}
	}
	sendErr := make(chan error, 1)
	go func() {
		for {
			var m rawMsg
			if err := in.RecvMsg(&m); err != nil {
				if errors.Is(err, io.EOF) {
					err = out.CloseSend()
				}
				sendErr <- err
				return
			}
			if err := out.SendMsg(&m); err != nil {
				sendErr <- nil // the provider ended the call: its status comes from RecvMsg below
				return
			}
		}
	}()
	if md, err := out.Header(); err == nil {
		in.SendHeader(md)
	}
	for {
		var m rawMsg
		err := out.RecvMsg(&m)
		if err != nil {
			in.SetTrailer(out.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := in.SendMsg(&m); err != nil {
			return err
		}
	}
}

func isProviderService(method string) bool {
	return strings.HasPrefix(method, "/tfplugin5.Provider/") || strings.HasPrefix(method, "/tfplugin6.Provider/")
}

// unaryProviderCall says whether method is a unary method of the provider protocol as the model
// describes it (a method it lacks is not).
func unaryProviderCall(method string) bool {
	_, m := protocol.Lookup(method)
	return m != nil && !m.ClientStream && !m.ServerStream
}
