// Package gate is a TCP relay on 127.0.0.1 for tests. It forwards bytes both ways, untouched (TLS
// passes through), and holds every connection once it has carried Threshold bytes towards the
// client, until the test opens the gate. A download through it stays in progress for as long as
// the test needs, whatever the machine's speed, with no clock involved.
package gate

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay is a running relay.
type Relay struct {
	Addr string // 127.0.0.1:PORT

	upstream  string
	threshold int64
	l         net.Listener

	heldOnce sync.Once
	held     chan struct{} // closed when a connection is first held
	openOnce sync.Once
	open     chan struct{} // closed when the gate opens
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool // open connections, both sides, closed when the test ends
}

// Start starts a relay to upstream (HOST:PORT) and stops it when the test ends.
func Start(t testing.TB, upstream string, threshold int64) *Relay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{Addr: l.Addr().String(), upstream: upstream, threshold: threshold, l: l,
		held: make(chan struct{}), open: make(chan struct{}), conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go r.serve()
	t.Cleanup(func() {
		r.Open()
		l.Close()
		r.mu.Lock()
		for c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

// Held is closed once a connection has been held at the threshold.
func (r *Relay) Held() <-chan struct{} { return r.held }

// Open lets every held connection, and every later one, through.
func (r *Relay) Open() { r.openOnce.Do(func() { close(r.open) }) }

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.relay(c)
		}()
	}
}

// relay joins one client connection to a new upstream connection.
func (r *Relay) relay(client net.Conn) {
	up, err := net.Dial("tcp", r.upstream)
	if err != nil {
		client.Close()
		return
	}
	r.track(client, up)
	defer r.untrack(client, up)
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(up, client)
		up.(*net.TCPConn).CloseWrite()
		done <- struct{}{}
	}()
	go func() {
		r.copyDown(client, up)
		client.(*net.TCPConn).CloseWrite()
		done <- struct{}{}
	}()
	<-done
	<-done
}

// copyDown copies upstream's bytes to the client, stopping at the threshold until the gate opens.
func (r *Relay) copyDown(client io.Writer, up io.Reader) {
	n, err := io.CopyN(client, up, r.threshold)
	if err != nil || n < r.threshold {
		return
	}
	select {
	case <-r.open:
	default:
		r.heldOnce.Do(func() { close(r.held) })
		<-r.open
	}
	io.Copy(client, up)
}

func (r *Relay) track(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		r.conns[c] = true
	}
}

func (r *Relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(r.conns, c)
	}
}
