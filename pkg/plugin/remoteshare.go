package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// errNoLaunches: the far side is an older release that gives each provider a connection of its
// own (its hello lacks launches).
var errNoLaunches = errors.New("the far side's oprov (an older release) does not share a connection among providers")

// streamDialer opens a stream of this command's shared connection, starting with hdr.
type streamDialer func(hdr streamHeader) (net.Conn, error)

// notShared is why a start could not share the command's connection (no broker could be
// reached, or the far side does not share): the start then makes a connection of its own.
type notShared struct{ why error }

func (e *notShared) Error() string { return "not sharing this command's connection: " + e.why.Error() }
func (e *notShared) Unwrap() error { return e.why }

// startAny starts a remote provider: on this command's shared connection where opts.Share asks
// for one and one can be had, else on a connection of its own.
func startAny(ctx context.Context, opts RemoteOptions) (*Provider, error) {
	if opts.Share {
		p, err := startShared(ctx, opts)
		var ns *notShared
		if !errors.As(err, &ns) {
			return p, err
		}
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "oprov: %s: %s; connecting on its own\n", opts.Name, quoteText(err.Error()))
		}
	}
	return startRemote(ctx, opts)
}

// startShared launches the provider on this command's shared connection (remotebroker.go).
func startShared(ctx context.Context, opts RemoteOptions) (*Provider, error) {
	opts = opts.withDefaults()
	dial, err := sharedDialer(ctx, opts)
	if err != nil {
		return nil, err
	}
	launch, err := dial(streamHeader{Launch: true})
	if err != nil {
		return nil, err
	}
	l := &remoteLink{name: opts.Name, stderr: &tailBuffer{max: 4096}, report: opts.Report, log: opts.Log,
		command: opts.Command, launch: launch, stdin: launch, gone: make(chan struct{})}
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "oprov: %s: on this command's shared connection\n", quoteText(opts.Name))
	}
	in := bufio.NewReaderSize(launch, 64<<10)
	proto, err := l.openBounded(ctx, in, opts)
	if err != nil {
		l.abort()
		var ns *notShared
		if errors.As(err, &ns) {
			return nil, ns
		}
		return nil, l.explain(err)
	}
	go func() { // the far side says nothing more on the launch stream: its end is the provider's
		io.Copy(io.Discard, io.LimitReader(in, 1<<20))
		close(l.gone)
	}()
	id := l.provider
	conn, err := grpc.NewClient("passthrough:///remote",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
			c, err := dial(streamHeader{Provider: id})
			if err != nil {
				return nil, err
			}
			return &countedConn{Conn: c, l: l}, nil
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
	if err != nil {
		l.abort()
		return nil, fmt.Errorf("%s: %w", opts.Name, err)
	}
	return newRemoteProvider(opts.Name, proto, conn, l)
}

// newRemoteProvider is the provider on the far side of l, speaking proto through conn.
func newRemoteProvider(name string, proto int, conn *grpc.ClientConn, l *remoteLink) (*Provider, error) {
	p := &Provider{Path: name, Protocol: proto, conn: conn, remote: l}
	switch proto {
	case 5:
		p.v5 = &client5{conn}
	case 6:
		p.v6 = &client6{conn}
	default:
		conn.Close()
		l.abort()
		return nil, l.explain(fmt.Errorf("the far side's provider negotiated protocol %d, which oprov does not speak (it speaks 5 and 6)", proto))
	}
	return p, nil
}

// countedConn counts the bytes that cross a calls stream into its link's counters.
type countedConn struct {
	net.Conn
	l *remoteLink
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.recv.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.l.sent.Add(int64(n))
	return n, err
}

// brokerSpec is what a launcher hands the broker it starts, on the broker's standard input.
type brokerSpec struct {
	Secret       []byte        `json:"secret"`
	Name         string        `json:"name"`
	Command      []string      `json:"command"`
	StartTimeout time.Duration `json:"start_timeout"`
	HelloTimeout time.Duration `json:"hello_timeout"`
	HelloSetting string        `json:"hello_setting"`
	// Parent is the command whose starts share the connection (tofu's pid) and Started its
	// start time, which tells it from a later process given the same pid.
	Parent  int    `json:"parent"`
	Started string `json:"started"`
	// File is the file that holds the secret, which the broker removes when it ends.
	File string `json:"file"`
}

// RemoteBrokerCommand is the hidden command that runs a broker (ServeBroker).
const RemoteBrokerCommand = "__remote-broker"
