package plugin

import (
	"bufio"
	"context"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// sessionNear is a near side that opened a shared connection to an in-process far side whose
// providers are this test binary; launched counts the providers it launched.
type sessionNear struct {
	sess     *yamux.Session
	launched atomic.Int32
	done     chan error
}

func openSession(t *testing.T) *sessionNear { t.Helper(); return openSessionWith(t, nil) }

// openSessionWith is openSession with the far side set up by set first.
func openSessionWith(t *testing.T, set func(*RemoteHost)) *sessionNear {
	t.Helper()
	toFar, fromNear := io.Pipe()
	fromFar, toNear := io.Pipe()
	n := &sessionNear{done: make(chan error, 1)}
	h := &RemoteHost{In: toFar, Out: toNear, Platform: "linux_amd64",
		Launch: func(context.Context, *RemoteRequest, func(io.Writer) error) (Options, error) {
			n.launched.Add(1)
			return selfAsProvider(t), nil
		}}
	if set != nil {
		set(h)
	}
	go func() { n.done <- h.Serve(context.Background()); toNear.Close() }()
	in := bufio.NewReader(fromFar)
	var hello RemoteHello
	if err := readLine(in, &hello); err != nil || !hello.Launches {
		t.Fatalf("hello %+v %v: want launches", hello, err)
	}
	go fromNear.Write([]byte(`{"protocol":` + strconv.Itoa(RemoteProtocol) + `,"session":true}` + "\n"))
	if line, err := in.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"ready":true`) {
		t.Fatalf("%s %v", line, err)
	}
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	var err error
	if n.sess, err = yamux.Client(&pipeConn{r: in, w: fromNear}, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.sess.Close()
		fromNear.Close()
		select {
		case <-n.done:
		case <-time.After(15 * time.Second):
			t.Error("the far side did not end after its connection did")
		}
	})
	return n
}

// stream opens a stream that starts with header and gives its first line back.
func (n *sessionNear) stream(t *testing.T, header string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	s, err := n.sess.Open()
	if err != nil {
		t.Fatal(err)
	}
	s.SetDeadline(time.Now().Add(10 * time.Second))
	if header != "" {
		io.WriteString(s, header)
	}
	in := bufio.NewReader(s)
	line, _ := in.ReadString('\n')
	return s, in, line
}

// launch runs a launch stream's opening and gives the reply to the request.
func (n *sessionNear) launch(t *testing.T) (net.Conn, string) {
	t.Helper()
	s, in, hello := n.stream(t, `{"launch":true}`+"\n")
	if !strings.Contains(hello, `"oprov_remote"`) {
		t.Fatalf("a launch stream began %q, want the hello", hello)
	}
	io.WriteString(s, `{"protocol":`+strconv.Itoa(RemoteProtocol)+`,"address":"example.com/acme/x"}`+"\n")
	reply, _ := in.ReadString('\n')
	return s, reply
}

// A shared connection serves only the streams it knows: a launch, or calls to a provider it
// launched and still runs. A bad or silent header, a provider it never launched or already
// stopped, a second session request, and launches past the bound are refused.
func TestRemoteSessionRefusesWhatItDoesNotKnow(t *testing.T) {
	old := sessionHeaderTimeout
	sessionHeaderTimeout = 300 * time.Millisecond
	defer func() { sessionHeaderTimeout = old }()
	n := openSession(t)

	for name, header := range map[string]string{
		"not json":      "GET / HTTP/1.1\n",
		"both kinds":    `{"launch":true,"provider":1}` + "\n",
		"neither":       `{}` + "\n",
		"too long":      `{"launch":true,"x":"` + strings.Repeat("a", 1000) + `"}` + "\n",
		"never sent":    "",
		"no such one":   `{"provider":99}` + "\n",
		"negative":      `{"provider":-1}` + "\n",
		"not a number":  `{"provider":"1"}` + "\n",
		"a launch's id": `{"provider":0}` + "\n",
	} {
		s, in, line := n.stream(t, header)
		rest, _ := io.ReadAll(in)
		if strings.Contains(line+string(rest), "oprov_remote") || len(rest) > 0 {
			t.Errorf("%s: the stream was served: %q %q", name, line, rest)
		}
		s.Close()
	}

	s, reply := n.launch(t)
	if !strings.Contains(reply, `"ready":true`) || !strings.Contains(reply, `"provider":1`) {
		t.Fatalf("the first launch: %q", reply)
	}
	// Its calls stream is served (the gRPC server's first frame comes).
	c, err := n.sess.Open()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, `{"provider":1}`+"\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if k, _ := c.Read(make([]byte, 9)); k == 0 {
		t.Error("the launched provider's calls stream was not served")
	}
	c.Close()
	s.Close() // stops provider 1
	time.Sleep(500 * time.Millisecond)
	c, in, line := n.stream(t, `{"provider":1}`+"\n")
	if rest, _ := io.ReadAll(in); line != "" || len(rest) > 0 {
		t.Errorf("a stopped provider's calls were served: %q %q", line, rest)
	}
	c.Close()

	// A session request on a launch stream.
	s, in, _ = n.stream(t, `{"launch":true}`+"\n")
	io.WriteString(s, `{"protocol":`+strconv.Itoa(RemoteProtocol)+`,"session":true}`+"\n")
	if reply, _ := in.ReadString('\n'); !strings.Contains(reply, "session request on a launch stream") {
		t.Errorf("a session request on a launch stream: %q", reply)
	}
	s.Close()

	// The bound on providers at once.
	var held []net.Conn
	for i := 0; i < defaultSessionProviders; i++ {
		s, reply := n.launch(t)
		if !strings.Contains(reply, `"ready":true`) {
			t.Fatalf("launch %d of %d: %q", i+1, defaultSessionProviders, reply)
		}
		held = append(held, s)
	}
	before := n.launched.Load()
	s, reply = n.launch(t)
	if !strings.Contains(reply, "already runs") || !strings.Contains(reply, `"full":true`) {
		t.Errorf("a launch past the bound: %q", reply)
	}
	if n.launched.Load() != before {
		t.Error("a launch past the bound reached Launch")
	}
	s.Close()
	for _, s := range held {
		s.Close()
	}
}

// A near side that keeps opening streams past the bound, and sends on each, does not make the
// far side keep what it sends: a stream refused is closed on the far side's end only, and yamux
// keeps what arrives on it (up to its window, 256 KiB) until the near side closes its end too, or
// for five minutes. Past twice the bound on open streams the far side ends the connection.
func TestRemoteSessionStreamFloodIsBounded(t *testing.T) {
	old := sessionHeaderTimeout
	sessionHeaderTimeout = time.Minute // the held streams keep their slots
	defer func() { sessionHeaderTimeout = old }()
	const bound = 4
	n := openSessionWith(t, func(h *RemoteHost) { h.Streams = bound })
	for i := 0; i < bound; i++ { // the bound's streams, held without a header
		if _, err := n.sess.Open(); err != nil {
			t.Fatal(err)
		}
	}
	kept, sent := floodStreams(t, n, "")
	if kept > 32<<20 {
		t.Errorf("the far side kept %d MiB of the %d MiB a near side sent on streams past the bound of %d", kept>>20, sent>>20, bound)
	}
}

// floodStreams opens 400 streams that start with header and sends 256 KiB on each, leaving them
// open, and gives by how much the heap grew (this process holds both sides) and what was sent.
func floodStreams(t *testing.T, n *sessionNear, header string) (kept int64, sent int) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	chunk := make([]byte, 256<<10)
	for i := 0; i < 400; i++ {
		s, err := n.sess.Open()
		if err != nil {
			break
		}
		s.SetDeadline(time.Now().Add(5 * time.Second))
		if header != "" {
			io.WriteString(s, header)
			// the far side's answer, after which it closes its end
			if _, err := bufio.NewReader(s).ReadString('\n'); err != nil {
				break
			}
		}
		k, err := s.Write(chunk)
		sent += k
		if err != nil {
			break
		}
	}
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("sent %d MiB on streams left open; the heap grew by %d MiB", sent>>20, kept>>20)
	return kept, sent
}

// The same flood within the bound: each stream is refused for its header, which frees its slot
// at once, and the near side never closes its end.
func TestRemoteSessionRefusedStreamsAreBounded(t *testing.T) {
	n := openSessionWith(t, func(h *RemoteHost) { h.Streams = 4 })
	if kept, sent := floodStreams(t, n, "not a header\n"); kept > 32<<20 {
		t.Errorf("the far side kept %d MiB of the %d MiB a near side sent on streams it refused", kept>>20, sent>>20)
	}
}

// A launch stream whose near side never sends its request holds its provider's place only for
// the opening's bound: then it hears why and is closed, and the place is free for the next.
func TestRemoteSessionSilentLaunchHoldsItsPlaceOnlyForTheBound(t *testing.T) {
	old := defaultSessionProviders
	defaultSessionProviders = 1
	defer func() { defaultSessionProviders = old }()
	n := openSessionWith(t, func(h *RemoteHost) { h.OpenTimeout = 500 * time.Millisecond })
	silent, in, hello := n.stream(t, `{"launch":true}`+"\n")
	if !strings.Contains(hello, `"oprov_remote"`) {
		t.Fatalf("a launch stream began %q", hello)
	}
	if _, reply := n.launch(t); !strings.Contains(reply, `"full":true`) {
		t.Errorf("a launch while the silent one holds the only place: %q", reply)
	}
	if reply, _ := in.ReadString('\n'); !strings.Contains(reply, "did not finish the opening") {
		t.Errorf("the silent launch stream heard %q", reply)
	}
	silent.Close()
	s, reply := n.launch(t)
	if !strings.Contains(reply, `"ready":true`) {
		t.Errorf("a launch after the silent one's bound: %q", reply)
	}
	s.Close()
}
