package plugin

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// A hostile near side that holds the far side's opening open (never sending its request, or
// trickling it a byte at a time, or never sending the zip it declared) is given up at the opening
// timeout, with an error naming that bound: a far side is one process per connection, and an
// account that may connect must not be able to keep processes waiting forever.
func TestRemoteHostOpeningIsBounded(t *testing.T) {
	for name, near := range map[string]func(w *io.PipeWriter){
		"silent": func(*io.PipeWriter) {},
		"trickle": func(w *io.PipeWriter) {
			for {
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
		"zip never sent": func(w *io.PipeWriter) {
			w.Write([]byte(`{"protocol":2,"address":"example.com/acme/x","size":1000}` + "\n"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			toFar, fromNear := io.Pipe()
			fromFar, toNear := io.Pipe()
			defer fromNear.Close()
			go io.Copy(io.Discard, fromFar)
			go near(fromNear)
			h := &RemoteHost{In: toFar, Out: toNear, Platform: "linux_amd64", OpenTimeout: 300 * time.Millisecond,
				Launch: func(_ context.Context, _ *RemoteRequest, zip func(io.Writer) error) (Options, error) {
					return Options{}, zip(io.Discard)
				}}
			done := make(chan error, 1)
			go func() { done <- h.Serve(context.Background()) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "within 300ms") {
					t.Errorf("err = %v, want the opening timeout named", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the far side still waits for the near side's opening after 5s (bound: 300ms)")
			}
		})
	}
}

// hostConn is a connection of one provider to a far side served in this process on pipes: the
// near side's output and input (in, past the ready line), and Serve's end (done).
type hostConn struct {
	in       *bufio.Reader
	fromNear *io.PipeWriter
	fromFar  *io.PipeReader
	done     chan error
}

// openHost serves h (its In and Out set here) in this process and opens a connection of one
// provider to it.
func openHost(t *testing.T, h *RemoteHost) *hostConn {
	t.Helper()
	toFar, fromNear := io.Pipe()
	fromFar, toNear := io.Pipe()
	h.In, h.Out = toFar, toNear
	c := &hostConn{fromNear: fromNear, fromFar: fromFar, done: make(chan error, 1)}
	go func() { c.done <- h.Serve(context.Background()); toNear.Close() }()
	c.in = bufio.NewReader(fromFar)
	if _, err := c.in.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	go fromNear.Write([]byte(`{"protocol":` + strconv.Itoa(RemoteProtocol) + `}` + "\n"))
	if line, err := c.in.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"ready":true`) {
		t.Fatalf("%s %v", line, err)
	}
	return c
}

// A near side that floods the far side with streams gets at most the bound served at once: the
// streams past it are closed at once, where each would have held a gRPC server connection and
// its buffers on the far side. One that keeps more than twice the bound open (the refused ones
// not closed on its end, where yamux keeps what it sends) has its connection ended.
func TestRemoteHostBoundsStreams(t *testing.T) {
	c := openHost(t, &RemoteHost{Platform: "linux_amd64",
		Launch: func(context.Context, *RemoteRequest, func(io.Writer) error) (Options, error) {
			return selfAsProvider(t), nil
		}})
	in, fromNear, done := c.in, c.fromNear, c.done
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	sess, err := yamux.Client(&pipeConn{r: in, w: fromNear}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2 * defaultRemoteStreams // within twice the bound: the connection lasts
	served := 0
	var open []net.Conn
	for range n {
		s, err := sess.Open()
		if err != nil {
			break
		}
		open = append(open, s)
	}
	for _, s := range open {
		// A served stream hears the gRPC server's first frame; a refused one ends.
		s.SetReadDeadline(time.Now().Add(3 * time.Second))
		if k, _ := s.Read(make([]byte, 9)); k > 0 {
			served++
		}
	}
	t.Logf("%d of %d streams served", served, len(open))
	if served == 0 || served > defaultRemoteStreams {
		t.Errorf("%d of %d streams were served at once, want 1 to %d", served, len(open), defaultRemoteStreams)
	}
	for range 60 {
		if _, err := sess.Open(); err != nil {
			break
		}
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the far side kept a connection whose near side keeps 60 more streams open")
	}
	sess.Close()
	fromNear.Close()
}
