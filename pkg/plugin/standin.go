package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Answer answers one unary provider call with no provider behind it: the response's wire bytes,
// or an error that goes back to tofu as the call's status.
type Answer func(ctx context.Context, call *Call) ([]byte, error)

// StandIn serves the provider protocol in a provider's place, with no process: tofu reattaches
// to its socket as to a provider, and every unary provider call is answered by its Answer (a
// recording's replay). Streams and go-plugin's own services are not served.
type StandIn struct {
	Protocol int
	answer   Answer
	dir      string
	socket   string
	srv      *grpc.Server
}

// startStandIn serves answer on a unix socket in a private directory made in base, the run's.
func startStandIn(base string, protocol int, answer Answer) (*StandIn, error) {
	if protocol != 5 && protocol != 6 {
		return nil, fmt.Errorf("a stand-in speaks plugin protocol 5 or 6, not %d", protocol)
	}
	dir, err := os.MkdirTemp(base, "standin-")
	if err != nil {
		return nil, err
	}
	s := &StandIn{Protocol: protocol, answer: answer, dir: dir, socket: filepath.Join(dir, "provider.sock")}
	l, err := net.Listen("unix", s.socket)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("stand-in provider: %w", err)
	}
	s.srv = grpc.NewServer(
		grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(s.handle),
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage),
	)
	// go-plugin asks for service "plugin"'s health on connect.
	h := health.NewServer()
	h.SetServingStatus("plugin", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s.srv, h)
	go s.srv.Serve(l)
	return s, nil
}

// handle answers one unary provider call; anything else is unimplemented.
func (s *StandIn) handle(_ any, stream grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return errors.New("stand-in: no method")
	}
	if !unaryProviderCall(method) {
		return status.Errorf(codes.Unimplemented, "%q is not served by a replay: only unary provider calls are recorded (streams such as InvokeAction never are)", method)
	}
	var req rawMsg
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	ctx := stream.Context()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	resp, err := s.answer(ctx, &Call{Method: method, Protocol: s.Protocol, Request: req.b})
	if err != nil {
		return err
	}
	return stream.SendMsg(&rawMsg{b: resp})
}

// ReattachConfig hands the stand-in to tofu as a provider: oprov's own process id stands in for
// the provider's.
func (s *StandIn) ReattachConfig() Reattach {
	return Reattach{Protocol: "grpc", ProtocolVersion: s.Protocol, Pid: os.Getpid(), Test: true,
		Addr: ReattachAddr{Network: "unix", String: s.socket}}
}

// Stop ends the stand-in's calls and removes its socket.
func (s *StandIn) Stop() {
	done := make(chan struct{})
	go func() { s.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		s.srv.Stop()
	}
	os.RemoveAll(s.dir)
}

// Invoke makes one unary call on the running provider with the request's wire bytes, and gives
// the response's: what a stand-in for it will answer later.
func (p *Provider) Invoke(ctx context.Context, method string, request []byte) ([]byte, error) {
	var resp rawMsg
	err := p.conn.Invoke(ctx, method, &rawMsg{b: request}, &resp, callOpts...)
	return resp.b, err
}
