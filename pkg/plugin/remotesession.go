package plugin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// A shared connection. tofu starts a provider several times in one command (its schema, the
// plan, the apply), and after `oprov init` each start is a process of its own: with a connection
// each, every start would pay for ssh's handshake and the far side's start. So the starts of one
// command share a connection (remotebroker.go keeps it on the near side) on which the far side
// launches a provider per launch stream:
//
//	near: {"protocol":2,"session":true}   the opening's request, to a far side whose hello says launches
//	far:  {"ready":true}                  then yamux, whose every stream starts with a header line:
//	near: {"launch":true}                 a launch stream: the opening again, on the stream (hello,
//	                                      request, zip, ready with "provider":N), after which the
//	                                      stream is held open for as long as the provider runs
//	near: {"provider":N}                  a stream carrying gRPC calls to provider N
//
// The far side stops provider N when its launch stream ends, and every provider when the
// connection does. What the far side runs is decided per launch exactly as for a connection of
// its own (Launch, under the far operator's configuration); the near side gains nothing by
// sharing but time.

// defaultSessionProviders bounds the providers one shared connection runs at once: tofu runs an
// instance of a provider for each of its configurations (aliases) at once. A start past it makes
// a connection of its own.
var defaultSessionProviders = 32

// defaultSessionStreams bounds the streams open at once on a shared connection: a launch stream
// and a calls stream or two for each provider.
const defaultSessionStreams = 128

// sessionHeaderTimeout bounds the wait for a stream's header line.
var sessionHeaderTimeout = 10 * time.Second

// maxSessionHeader bounds a stream's header line.
const maxSessionHeader = 256

// streamHeader is the first line of a stream on a shared connection.
type streamHeader struct {
	Launch   bool `json:"launch,omitempty"`
	Provider int  `json:"provider,omitempty"`
}

// sessionState is what a shared connection's far side runs: its providers by number, each with
// the listener its calls streams are handed to.
type sessionState struct {
	mu        sync.Mutex
	next      int
	providers map[int]*chanListener
	running   sync.WaitGroup
}

// serveSession serves a shared connection until it ends (or ctx does), then stops every
// provider it launched.
func (h *RemoteHost) serveSession(ctx context.Context, in *bufio.Reader) error {
	// A stream's window here is 1 MiB, not 4: a shared connection holds 16 times the streams of
	// one of its own, and a near side could fill every window.
	sess, err := h.session(ctx, in, 1<<20)
	if err != nil {
		return err
	}
	st := &sessionState{providers: map[int]*chanListener{}}
	streams := h.Streams
	if streams == 0 {
		streams = defaultSessionStreams
	}
	l := boundStreams(sess, streams)
	for {
		c, err := l.Accept()
		if err != nil {
			break // the session ended
		}
		st.running.Add(1) // before the stream is read: a launch cannot begin after the Wait below
		go func() {
			defer st.running.Done()
			h.serveStream(ctx, st, c)
		}()
	}
	st.running.Wait()
	return nil
}

// serveStream reads a stream's header and serves it: a launch, or calls to a provider this
// connection launched. Anything else closes the stream.
func (h *RemoteHost) serveStream(ctx context.Context, st *sessionState, c net.Conn) {
	c.SetReadDeadline(time.Now().Add(sessionHeaderTimeout))
	in := bufio.NewReaderSize(c, 64<<10)
	hdr, err := readHeader(in)
	if err != nil {
		writeLine(c, remoteReply{Error: "the stream's header: " + err.Error()})
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	if hdr.Launch {
		h.serveLaunch(ctx, st, c, in)
		return
	}
	st.mu.Lock()
	l := st.providers[hdr.Provider]
	st.mu.Unlock()
	if l == nil || !l.hand(&bufferedConn{Conn: c, r: in}) {
		c.Close()
	}
}

// readHeader reads a stream's header line: at most maxSessionHeader bytes, one of its two kinds.
func readHeader(in *bufio.Reader) (streamHeader, error) {
	var hdr streamHeader
	line, err := in.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxSessionHeader {
			return hdr, fmt.Errorf("longer than %d bytes", maxSessionHeader)
		}
		return hdr, err
	}
	if len(line) > maxSessionHeader {
		return hdr, fmt.Errorf("longer than %d bytes", maxSessionHeader)
	}
	if err := readLine(bufio.NewReader(bytes.NewReader(line)), &hdr); err != nil {
		return hdr, err
	}
	if hdr.Launch == (hdr.Provider != 0) {
		return hdr, errors.New(`neither {"launch":true} nor {"provider":N}`)
	}
	return hdr, nil
}

// serveLaunch runs the opening on a launch stream, and the launched provider until the stream
// ends; then stops it.
func (h *RemoteHost) serveLaunch(ctx context.Context, st *sessionState, c net.Conn, in *bufio.Reader) {
	defer c.Close()
	st.mu.Lock()
	full := len(st.providers) >= defaultSessionProviders
	if !full {
		st.next++
		st.providers[st.next] = nil // held while it launches
	}
	id := st.next
	st.mu.Unlock()
	if err := writeLine(c, RemoteHello{Protocol: RemoteProtocol, Platform: h.Platform, Source: h.Source, Launches: true}); err != nil {
		return
	}
	if full { // the start makes a connection of its own; its request is read, not heeded
		c.SetReadDeadline(time.Now().Add(sessionHeaderTimeout))
		readLine(in, &RemoteRequest{})
		writeLine(c, remoteReply{Full: true, Error: fmt.Sprintf("this connection already runs %d providers, the most it runs at once", defaultSessionProviders)})
		return
	}
	defer func() {
		st.mu.Lock()
		delete(st.providers, id)
		st.mu.Unlock()
	}()
	p, _, err := h.openBounded(ctx, in, c, false)
	if err != nil {
		return
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), remoteEndBound)
	defer cancel()
	defer p.Stop(stopCtx)
	l := newChanListener()
	srv := providerServer(p)
	go srv.Serve(l)
	defer srv.Stop()
	defer l.Close()
	st.mu.Lock()
	st.providers[id] = l
	st.mu.Unlock()
	if err := writeLine(c, remoteReply{Ready: true, Protocol: p.Protocol, Provider: id}); err != nil {
		return
	}
	// The near side says nothing more on the stream; it ends it to stop the provider. Whatever
	// it sends instead is read and dropped, and the stream's end is the provider's.
	io.Copy(io.Discard, io.LimitReader(in, 1<<20))
}

// chanListener is a listener whose connections are handed to it: the calls streams of one
// provider.
type chanListener struct {
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives c to the listener, or says false once it is closed.
func (l *chanListener) hand(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return sessionAddr{} }

type sessionAddr struct{}

func (sessionAddr) Network() string { return "yamux" }
func (sessionAddr) String() string  { return "shared connection" }

// bufferedConn is a connection whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
