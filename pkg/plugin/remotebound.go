package plugin

import (
	"fmt"
	"net"
	"sync"
)

// boundStreams is a far side's listener over its connection's streams that keeps at most max of
// them open at once: a stream accepted beyond that is closed at once. A near side opens one
// stream (another when gRPC reconnects), so the bound is only met by a near side that floods the
// far side with streams, each of which would otherwise hold a gRPC server connection and its
// buffers.
//
// A stream closed on this end (refused here, or by whoever served it) is closed on this end only:
// yamux keeps what the near side sends on it (up to its window) until the near side closes its
// end too. So once the connection holds more than twice max streams, open or closed on this end
// alone, the near side is not closing the streams ended for it, and the connection is ended (the
// listener closed) instead of keeping what it sends.
func boundStreams(l net.Listener, max int) net.Listener {
	return &streamBound{Listener: l, slots: make(chan struct{}, max)}
}

type streamBound struct {
	net.Listener
	slots chan struct{}
}

func (b *streamBound) Accept() (net.Conn, error) {
	for {
		c, err := b.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n, ok := b.Listener.(interface{ NumStreams() int }); ok && n.NumStreams() > 2*cap(b.slots) {
			c.Close()
			b.Listener.Close()
			return nil, fmt.Errorf("the near side kept more than %d streams of the connection open at once, twice the most it may open", 2*cap(b.slots))
		}
		select {
		case b.slots <- struct{}{}:
			return &boundConn{Conn: c, free: func() { <-b.slots }}, nil
		default:
			c.Close()
		}
	}
}

// boundConn gives its slot back once, when closed.
type boundConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *boundConn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}
