package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Relay is a transparent gRPC pass-through between tofu and one provider: it serves plain gRPC on
// a unix socket in a private directory (mode 0700) and forwards every call, unary or streaming,
// frame by frame without decoding it, with its metadata, headers, trailers and status, over its
// own connection to the provider. Every service passes (tfplugin5/6.Provider, go-plugin's
// controller and stdio, health), so the provider cannot tell a relayed call from a direct one.
//
// The launch group puts one in front of a provider that tofu cannot reattach to itself (one
// that serves TLS on its own), and a middleware that looks at calls can sit in the same place.
type Relay struct {
	to     *grpc.ClientConn
	srv    *grpc.Server
	ln     net.Listener
	dir    string
	closed sync.Once
}

// frame is one gRPC message, still encoded.
type frame []byte

// rawCodec moves frames without decoding them. Its name keeps the content type tofu and the
// provider use (application/grpc+proto).
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("relay: cannot send a %T", v)
	}
	return *f, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("relay: cannot receive into a %T", v)
	}
	*f = append((*f)[:0], data...)
	return nil
}

// StartRelay serves a relay to the provider behind conn on a new private unix socket.
func StartRelay(conn *grpc.ClientConn) (*Relay, error) {
	dir, err := os.MkdirTemp("", "oprov-relay-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "relay.sock"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("relay: %w", err)
	}
	r := &Relay{to: conn, ln: ln, dir: dir}
	r.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(r.forward))
	go r.srv.Serve(ln)
	return r, nil
}

// Addr is where tofu reaches the relay.
func (r *Relay) Addr() ReattachAddr {
	return ReattachAddr{Network: "unix", String: r.ln.Addr().String()}
}

// Close stops serving at once (calls in flight end) and removes the socket's directory.
func (r *Relay) Close() {
	r.closed.Do(func() {
		r.srv.Stop()
		os.RemoveAll(r.dir)
	})
}

var bothWays = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// forward relays one call: requests up, responses down, then the provider's trailer and status.
func (r *Relay) forward(_ any, in grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(in)
	if !ok {
		return errors.New("relay: call without a method")
	}
	ctx, cancel := context.WithCancel(in.Context())
	defer cancel()
	md, _ := metadata.FromIncomingContext(ctx)
	out, err := r.to.NewStream(metadata.NewOutgoingContext(ctx, md.Copy()), bothWays, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	upErr := make(chan error, 1)
	go func() { upErr <- pumpUp(in, out) }()
	downErr := pumpDown(out, in)
	in.SetTrailer(out.Trailer())
	if downErr != io.EOF {
		return downErr // the provider's status, or a broken connection to it
	}
	// The provider finished with OK; a failed upward copy means the caller went away.
	select {
	case err := <-upErr:
		if err != nil && err != io.EOF {
			return err
		}
	default:
	}
	return nil
}

// pumpUp copies the caller's messages to the provider, then half-closes.
func pumpUp(in grpc.ServerStream, out grpc.ClientStream) error {
	for {
		var f frame
		if err := in.RecvMsg(&f); err != nil {
			if err == io.EOF {
				return out.CloseSend()
			}
			return err
		}
		if err := out.SendMsg(&f); err != nil {
			return err
		}
	}
}

// pumpDown copies the provider's header and messages to the caller; it returns io.EOF when the
// provider ended the call with OK, or the provider's error.
func pumpDown(out grpc.ClientStream, in grpc.ServerStream) error {
	for first := true; ; first = false {
		var f frame
		err := out.RecvMsg(&f)
		if first {
			if h, herr := out.Header(); herr == nil {
				if err := in.SendHeader(h); err != nil {
					return err
				}
			}
		}
		if err != nil {
			return err
		}
		if err := in.SendMsg(&f); err != nil {
			return err
		}
	}
}
