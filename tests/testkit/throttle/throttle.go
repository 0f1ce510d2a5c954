// Package throttle is a TCP proxy on 127.0.0.1 that slows what a server sends back, so that a
// test can act (kill, stop) while a real download from a real server is under way. Bytes pass
// through unchanged (TLS included), so the server's certificate still verifies.
package throttle

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards connections to a target, sending the target's answers back at a bounded rate.
type Proxy struct {
	Addr   string // 127.0.0.1:PORT
	target string
	rate   atomic.Int64 // bytes per second back to the client; 0: no limit
	ln     net.Listener
	wg     sync.WaitGroup
	conns  sync.Map // open connections, closed when the test ends
}

// Start starts a proxy to target (HOST:PORT) that sends back at most bytesPerSecond, and stops it
// when the test ends.
func Start(t testing.TB, target string, bytesPerSecond int64) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln}
	p.rate.Store(bytesPerSecond)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		p.wg.Wait()
	})
	return p
}

// SetRate changes the rate for what is sent from now on (0: no limit).
func (p *Proxy) SetRate(bytesPerSecond int64) { p.rate.Store(bytesPerSecond) }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	p.conns.Store(c, true)
	p.conns.Store(up, true)
	defer p.conns.Delete(c)
	defer p.conns.Delete(up)
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
	}()
	buf := make([]byte, 16<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
			if r := p.rate.Load(); r > 0 {
				time.Sleep(time.Duration(int64(n) * int64(time.Second) / r))
			}
		}
		if err != nil {
			return
		}
	}
}
