package serve

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ClientLimits bound what one client (or many) can make the server hold, whatever it does: how
// long it may take to send a request, how slowly it may take a response, how many connections and
// HTTP/2 streams it may keep open, how many archives (each an open cache file) are sent at once.
// A client past a bound is cut off or refused; /healthz and /metrics keep a reserve of their own.
type ClientLimits struct {
	// HeaderTimeout bounds reading a request's headers; ReadTimeout the whole request, body
	// included.
	HeaderTimeout time.Duration
	ReadTimeout   time.Duration
	// StallTimeout is the window in which a response must move: every write of up to
	// WriteChunk bytes must be taken by the client within it, so a client that reads slower than
	// WriteChunk/StallTimeout (or stops reading, or keeps an HTTP/2 window shut) is cut off.
	StallTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its next request.
	IdleTimeout time.Duration
	// MaxConnections caps the connections served at once. Past it, ReserveConnections more are
	// accepted for at most ReserveLife each and answer only /healthz and /metrics (others get
	// 503); past those, new connections are closed as soon as they are accepted.
	MaxConnections     int
	ReserveConnections int
	ReserveLife        time.Duration
	// MaxStreams caps the concurrent HTTP/2 streams of one connection.
	MaxStreams int
	// MaxArchives caps the archive responses under way at once (each holds a cache file open); a
	// request past it waits up to ArchiveWait for a slot, then gets 503.
	MaxArchives int
	ArchiveWait time.Duration
	// MaxPathLength is the longest request target accepted; a longer one gets 414.
	MaxPathLength int
}

// WriteChunk is the most a response writes in one go: each chunk must be taken within the stall
// timeout.
const WriteChunk = 32 << 10

// maxHeaderBytes bounds a request's header block (request line included): past it the server
// answers 431 without reading on.
const maxHeaderBytes = 64 << 10

// DefaultClientLimits are far above what a tofu or terraform client needs, and low enough that a
// machine's default 1,024 descriptors are not all handed out.
func DefaultClientLimits() ClientLimits {
	return ClientLimits{
		HeaderTimeout:      10 * time.Second,
		ReadTimeout:        30 * time.Second,
		StallTimeout:       30 * time.Second,
		IdleTimeout:        2 * time.Minute,
		MaxConnections:     512,
		ReserveConnections: 32,
		ReserveLife:        2 * time.Second,
		MaxStreams:         32,
		MaxArchives:        256,
		ArchiveWait:        10 * time.Second,
		MaxPathLength:      1024,
	}
}

// withDefaults fills the zero fields with the defaults.
func (l ClientLimits) withDefaults() ClientLimits {
	d := DefaultClientLimits()
	fill := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	filli := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&l.HeaderTimeout, d.HeaderTimeout)
	fill(&l.ReadTimeout, d.ReadTimeout)
	fill(&l.StallTimeout, d.StallTimeout)
	fill(&l.IdleTimeout, d.IdleTimeout)
	fill(&l.ReserveLife, d.ReserveLife)
	fill(&l.ArchiveWait, d.ArchiveWait)
	filli(&l.MaxConnections, d.MaxConnections)
	filli(&l.ReserveConnections, d.ReserveConnections)
	filli(&l.MaxStreams, d.MaxStreams)
	filli(&l.MaxArchives, d.MaxArchives)
	filli(&l.MaxPathLength, d.MaxPathLength)
	return l
}

// descriptorMargin is what the server keeps for itself beyond its clients: the listener, the
// cache's files and locks, registry connections, logs.
const descriptorMargin = 64

// FitDescriptors lowers MaxConnections and MaxArchives so that, together with the reserve and a
// margin, they fit in nofile descriptors (the process's limit). It says whether it lowered them.
// Each connection holds one descriptor and each archive response one more.
func (l *ClientLimits) FitDescriptors(nofile uint64) bool {
	*l = l.withDefaults()
	need := uint64(l.MaxConnections + l.ReserveConnections + l.MaxArchives + descriptorMargin)
	if nofile >= need {
		return false
	}
	avail := int64(nofile) - int64(l.ReserveConnections) - descriptorMargin
	if avail < 8 {
		l.ReserveConnections = 4
		avail = max(int64(nofile)-4-descriptorMargin/2, 8)
	}
	// Connections and archives share what is left in their configured proportion.
	total := int64(l.MaxConnections + l.MaxArchives)
	conns := max(avail*int64(l.MaxConnections)/total, 4)
	l.MaxConnections = int(conns)
	l.MaxArchives = int(max(avail-conns, 2))
	return true
}

// connListener caps the connections served at once (see ClientLimits.MaxConnections), and closes
// them lingering while the server drains (see countedConn.Close).
type connListener struct {
	net.Listener
	limits  ClientLimits
	metrics *metrics
	normal  atomic.Int64
	reserve atomic.Int64

	draining  atomic.Pointer[time.Time] // when set, connections linger until then at most
	lingering sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Close closes the listener once: the drain closes it before it says so, and http.Server's
// Shutdown closes it again.
func (l *connListener) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.Listener.Close() })
	return l.closeErr
}

func (l *connListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.normal.Add(1) <= int64(l.limits.MaxConnections) {
			return &countedConn{Conn: c, l: l, release: func() { l.normal.Add(-1) }}, nil
		}
		l.normal.Add(-1)
		if l.reserve.Add(1) <= int64(l.limits.ReserveConnections) {
			// The whole connection, handshake included, lives at most ReserveLife, whatever
			// deadlines the HTTP server sets later.
			c.SetDeadline(time.Now().Add(l.limits.ReserveLife))
			l.metrics.connectionsRefused("reserve")
			return &reserveConn{countedConn{Conn: c, release: func() { l.reserve.Add(-1) }}}, nil
		}
		l.reserve.Add(-1)
		l.metrics.connectionsRefused("closed")
		c.Close()
	}
}

// countedConn gives its slot back once closed.
type countedConn struct {
	net.Conn
	l       *connListener
	once    sync.Once
	release func()
}

// Close closes the connection. While the server drains, it closes lingering: the write side
// first, then it reads (and drops) what the client still sends until the client closes too or
// the drain ends. A plain close with unread bytes from the client (an HTTP/2 client keeps
// sending WINDOW_UPDATEs) makes the kernel reset the connection and drop the end of a response
// still in its buffers, which the client then sees cut short.
func (c *countedConn) Close() error {
	var err error
	c.once.Do(func() {
		c.release()
		tc, ok := c.Conn.(*net.TCPConn)
		var until *time.Time
		if c.l != nil {
			until = c.l.draining.Load()
		}
		if !ok || until == nil {
			err = c.Conn.Close()
			return
		}
		tc.CloseWrite()
		c.l.lingering.Add(1)
		go func() {
			defer c.l.lingering.Done()
			tc.SetReadDeadline(*until)
			io.Copy(io.Discard, tc)
			tc.Close()
		}()
	})
	return err
}

// reserveConn is a connection past MaxConnections: its deadline was set once at accept and stays.
type reserveConn struct{ countedConn }

func (c *reserveConn) SetDeadline(time.Time) error      { return nil }
func (c *reserveConn) SetReadDeadline(time.Time) error  { return nil }
func (c *reserveConn) SetWriteDeadline(time.Time) error { return nil }

type reserveKey struct{}

// connContext marks the requests of reserve connections.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if _, ok := c.(*reserveConn); ok {
		return context.WithValue(ctx, reserveKey{}, true)
	}
	return ctx
}

func onReserve(ctx context.Context) bool { v, _ := ctx.Value(reserveKey{}).(bool); return v }

// admit refuses, before any routing, what no client needs: a request on a reserve connection
// other than /healthz and /metrics (503), a target over MaxPathLength (414), a GET or HEAD that
// declares a body (400). The connection is then closed, so an unread body holds nothing.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	var rf refusal
	switch {
	case len(r.RequestURI) > s.limits.MaxPathLength || len(r.URL.Path) > s.limits.MaxPathLength:
		rf = refusal{http.StatusRequestURITooLong, "path_too_long"}
	case onReserve(r.Context()) && r.URL.Path != "/healthz" && r.URL.Path != "/metrics":
		w.Header().Set("Retry-After", "1")
		rf = refusal{http.StatusServiceUnavailable, "busy"}
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.ContentLength != 0 || len(r.TransferEncoding) > 0):
		rf = refusal{http.StatusBadRequest, "body_on_get"}
	default:
		return true
	}
	w.Header().Set("Connection", "close")
	s.fail(w, r, rf, fmt.Errorf("refused before routing: %s", rf.reason))
	// The server would read on to discard a declared body; the body is not wanted, so the read
	// ends now and the connection (for HTTP/2, the stream) with it.
	http.NewResponseController(w).SetReadDeadline(time.Now())
	return false
}

// archiveSlot takes one of the MaxArchives slots, waiting up to ArchiveWait; release gives it back.
func (s *Server) archiveSlot(ctx context.Context) (release func(), ok bool) {
	select {
	case s.archives <- struct{}{}:
		return func() { <-s.archives }, true
	default:
	}
	t := time.NewTimer(s.limits.ArchiveWait)
	defer t.Stop()
	select {
	case s.archives <- struct{}{}:
		return func() { <-s.archives }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

// stallWriter gives a response a fresh write deadline (now + StallTimeout) before each chunk of at
// most WriteChunk bytes, so a response moves at least that much per window or is cut off: the
// server side of the registry side's stall watchdog (oci.StallError), kept by the HTTP server's own
// deadlines (per connection for HTTP/1, per stream for HTTP/2) rather than a timer of ours.
//
// Setting a deadline costs (for HTTP/2 a message to the connection's loop and a timer), so it is
// moved only once a quarter of the window has passed since it was last set: each chunk then still
// has at least three quarters of the window, and a client that stops reading is cut off within
// one window.
type stallWriter struct {
	rc     *http.ResponseController
	window time.Duration
	armed  time.Time
	err    error // the first deadline that could not be set; writes go on without one
}

// arm sets the deadline to now + window.
func (s *stallWriter) arm() {
	if s.err == nil {
		s.armed = time.Now()
		s.err = s.rc.SetWriteDeadline(s.armed.Add(s.window))
	}
}

// rearm moves the deadline when a quarter of the window has passed since it was set.
func (s *stallWriter) rearm() {
	if time.Since(s.armed) > s.window/4 {
		s.arm()
	}
}

// write sends p in chunks, each under a fresh deadline.
func (s *stallWriter) write(w io.Writer, p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), WriteChunk)
		s.rearm()
		m, err := w.Write(p[:c])
		n += m
		if err != nil {
			return n, err
		}
		p = p[c:]
	}
	return n, nil
}

// readFrom copies src in chunks, each under a fresh deadline.
func (s *stallWriter) readFrom(w io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, WriteChunk)
	var n int64
	for {
		m, rerr := src.Read(buf)
		if m > 0 {
			s.rearm()
			k, err := w.Write(buf[:m])
			n += int64(k)
			if err != nil {
				return n, err
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
