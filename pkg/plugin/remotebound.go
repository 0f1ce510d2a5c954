package plugin

import (
	"net"
	"sync"
)

// boundStreams is a far side's listener over its connection's streams that keeps at most max of
// them open at once: a stream accepted beyond that is closed at once. A near side opens one
// stream (another when gRPC reconnects), so the bound is only met by a near side that floods the
// far side with streams, each of which would otherwise hold a gRPC server connection and its
// buffers.
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
