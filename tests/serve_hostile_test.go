package tests

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The hostile-client suite: clients of ours on 127.0.0.1, each kind bounded in count and time,
// against one `oprov serve` with short client bounds. Every kind must be cut off within its bound,
// the server's descriptors and RSS stay bounded (the peaks are printed), and /healthz answers
// within a second throughout; also with the server's open-files limit at 256.

// hostileBounds are the client bounds the suite runs the server with (short, so the suite is
// fast; the same flags an operator turns).
var hostileBounds = []string{
	"--client-header-timeout", "2s", "--client-read-timeout", "4s", "--client-stall-timeout", "2s",
	"--max-streams", "8",
}

const (
	hostileHeader = 2 * time.Second
	hostileStallT = 2 * time.Second
)

// watch follows a running server: its open descriptors (sampled) and /healthz, probed on a fresh
// connection every 200 ms with a one-second timeout, as a load balancer would.
type watch struct {
	pid        int
	peakFDs    atomic.Int64
	slowest    atomic.Int64 // nanoseconds
	probes     atomic.Int64
	mu         sync.Mutex
	failures   []string
	stop, done chan struct{}
}

func watchServer(t *testing.T, s *served) *watch {
	w := &watch{pid: s.cmd.Process.Pid, stop: make(chan struct{}), done: make(chan struct{})}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(s.CAFile)
	pool.AppendCertsFromPEM(pem)
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			if n := w.fds(); n > w.peakFDs.Load() {
				w.peakFDs.Store(n)
			}
			start := time.Now()
			resp, err := probe.Get(s.URL + "healthz")
			d := time.Since(start)
			w.probes.Add(1)
			if d > time.Duration(w.slowest.Load()) {
				w.slowest.Store(int64(d))
			}
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			if err != nil {
				w.mu.Lock()
				w.failures = append(w.failures, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *watch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// fds counts the server's open descriptors.
func (w *watch) fds() int64 {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(w.pid) + "/fd")
	if err != nil {
		return -1
	}
	return int64(len(ents))
}

// peakRSS is the server's peak resident set so far, in MiB (VmHWM).
func (w *watch) peakRSS() float64 {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(w.pid) + "/status")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kib / 1024
		}
	}
	return -1
}

// hostileConn dials the server over TLS with a small receive buffer (so that a client that stops
// reading stops the server's writes soon, as on a real network), speaking proto.
func hostileConn(t *testing.T, s *served, proto string) (*tls.Conn, error) {
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(s.CAFile)
	pool.AppendCertsFromPEM(pem)
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<10) })
	}}
	host := strings.TrimSuffix(strings.TrimPrefix(s.URL, "https://"), "/")
	return tls.DialWithDialer(d, "tcp", host, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{proto}})
}

// parallel runs f for 0..n-1 at once and waits for all.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

// failf collects failures from many goroutines, reporting the first few.
type failures struct {
	mu sync.Mutex
	n  int
	t  *testing.T
}

func (f *failures) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n++; f.n <= 3 {
		f.t.Errorf(format, args...)
	}
}

func (f *failures) done(what string) {
	if f.n > 3 {
		f.t.Errorf("%s: %d failures in all", what, f.n)
	}
}

func TestServeHostileClients(t *testing.T) {
	for _, c := range []struct {
		name     string
		nofile   int
		readers  int
		headers  int
		streams  int // HTTP/2 connections, 250 streams each
		flooders int
	}{
		{"default", 0, 300, 200, 4, 20},
		{"nofile256", 256, 130, 100, 4, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, args := helloInRegistry(t)
			var wrapper []string
			if c.nofile > 0 {
				wrapper = []string{prlimitBin(t), fmt.Sprintf("--nofile=%d:%d", c.nofile, c.nofile)}
			}
			s := startServeUnder(t, nil, wrapper, false, append(args, hostileBounds...)...)
			archive := helloArchive("1.0.0", helloPlatforms[0])
			size := fileSize(t, helloRelease(t)+"/terraform-provider-hello_1.0.0_"+helloPlatforms[0]+".zip")
			if code, _, _ := s.get(t, archive); code != 200 { // warm: the archive is in the cache
				t.Fatalf("warming: %d\n%s", code, s.logText())
			}
			w := watchServer(t, s)
			base := w.fds()

			phase := func(name string) { fmt.Printf("%s %s\n", time.Now().Format("15:04:05.000"), name) }
			phase("slow headers")
			t.Run("slow headers", func(t *testing.T) { slowHeaders(t, s, c.headers) })
			phase("slow readers")
			t.Run("slow readers", func(t *testing.T) { slowReaders(t, s, w, archive, size, c.readers, base) })
			phase("GET with a body")
			t.Run("GET with a body", func(t *testing.T) { getWithBody(t, s, 50) })
			phase("HTTP/2")
			t.Run("HTTP/2 zero window", func(t *testing.T) { zeroWindow(t, s, w, archive, c.streams, base) })
			phase("huge path")
			t.Run("huge path", func(t *testing.T) { hugePath(t, s) })
			t.Run("index.json flood", func(t *testing.T) { indexFlood(t, s, c.flooders, 100) })

			// And afterwards an ordinary client is served, whole.
			if code, sum, _ := s.get(t, archive); code != 200 || "zh:"+sum != helloHashes[helloPlatforms[0]].ZH {
				t.Errorf("after the attacks an archive download gives %d %s", code, sum)
			}
			w.end()
			if n := len(w.failures); n > 0 {
				t.Errorf("/healthz failed %d of %d times (first: %s)", n, w.probes.Load(), w.failures[0])
			}
			slowest := time.Duration(w.slowest.Load())
			if slowest > time.Second {
				t.Errorf("/healthz took %v at worst, want under a second", slowest)
			}
			if strings.Contains(s.logText(), "too many open files") {
				t.Errorf("the server ran out of descriptors:\n%s", grepLines(s.logText(), "too many open files", 3))
			}
			fmt.Printf("\nhostile clients (%s): peak open descriptors %d (at rest %d), peak RSS %.1f MiB, /healthz %d probes, slowest %v\n",
				c.name, w.peakFDs.Load(), base, w.peakRSS(), w.probes.Load(), slowest.Round(time.Millisecond))
			if limit := int64(c.nofile); limit > 0 && w.peakFDs.Load() >= limit {
				t.Errorf("the server reached its descriptor limit: %d", w.peakFDs.Load())
			}
			if rss := w.peakRSS(); rss > 200 {
				t.Errorf("peak RSS %.1f MiB, want under 200", rss)
			}
		})
	}
}

func prlimitBin(t *testing.T) string {
	p, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatal("prlimit (util-linux) is needed to lower the server's open-files limit")
	}
	return p
}

func grepLines(text, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// slowHeaders: n clients send half a request (and some only connect, without a TLS handshake);
// each is closed within the header timeout and a margin.
func slowHeaders(t *testing.T, s *served, n int) {
	f := &failures{t: t}
	host := strings.TrimSuffix(strings.TrimPrefix(s.URL, "https://"), "/")
	bound := hostileHeader + 3*time.Second
	parallel(n, func(i int) {
		start := time.Now()
		var c net.Conn
		var err error
		if i%4 == 0 {
			c, err = net.DialTimeout("tcp", host, 5*time.Second) // no handshake at all
		} else {
			var tc *tls.Conn
			if tc, err = hostileConn(t, s, "http/1.1"); err == nil {
				_, err = io.WriteString(tc, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
			}
			c = tc
		}
		if err != nil {
			return // refused at the limit: not held either
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(bound + 5*time.Second))
		io.Copy(io.Discard, c) // until the server closes
		if d := time.Since(start); d > bound {
			f.add("a slow-header client was held %v, bound %v", d.Round(time.Millisecond), bound)
		}
	})
	f.done("slow headers")
}

// slowReaders: n clients ask for the archive and read nothing. Once the stall timeout has passed
// (with a margin) the server has let go of them: its descriptors are back near rest, and what each
// client can still read is short of the archive.
func slowReaders(t *testing.T, s *served, w *watch, archive string, size int64, n int, base int64) {
	f := &failures{t: t}
	conns := make([]*tls.Conn, n)
	parallel(n, func(i int) {
		c, err := hostileConn(t, s, "http/1.1")
		if err != nil {
			return
		}
		if _, err := io.WriteString(c, "GET "+archive+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			c.Close()
			return
		}
		conns[i] = c
	})
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	fmt.Printf("%s slow readers sent\n", time.Now().Format("15:04:05.000"))
	time.Sleep(3*hostileStallT + 2*time.Second)
	fmt.Printf("%s slow readers read\n", time.Now().Format("15:04:05.000"))
	if now := w.fds(); now > base+40 {
		f.add("%v after %d slow readers started, the server still holds %d descriptors (at rest %d)", 3*hostileStallT+2*time.Second, n, now, base)
	}
	// The server logs each response once it ends: every archive response to these clients ended
	// short of the archive. (The clients do not read what is left in their buffers: decrypting
	// hundreds of megabytes here would only measure this test's CPU.)
	cut, whole := 0, 0
	for _, l := range s.logLines(archive) {
		var e struct {
			Status int   `json:"status"`
			Bytes  int64 `json:"bytes"`
		}
		json.Unmarshal([]byte(l), &e)
		switch {
		case e.Status == 200 && e.Bytes >= size:
			whole++
		case e.Status == 200:
			cut++
		}
	}
	held := 0
	for _, c := range conns {
		if c != nil {
			held++
		}
	}
	if whole != 1 || cut == 0 {
		f.add("of %d clients that stopped reading (%d connected), %d got the whole archive (want none) and %d were cut off", n, held, whole-1, cut)
	}
	fmt.Printf("slow readers: %d connected, %d cut off\n", held, cut)
	f.done("slow readers")
}

// getWithBody: GETs that declare a body and never send it are answered 400 at once and closed.
func getWithBody(t *testing.T, s *served, n int) {
	f := &failures{t: t}
	parallel(n, func(i int) {
		start := time.Now()
		c, err := hostileConn(t, s, "http/1.1")
		if err != nil {
			f.add("dial: %v", err)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET "+helloPath+"index.json HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			f.add("GET with a body: %v", err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		if _, err := br.ReadByte(); err == nil {
			f.add("the connection of a GET with a body stayed open")
		}
		if d := time.Since(start); resp.StatusCode != 400 || d > 3*time.Second {
			f.add("GET with a body: %d after %v, want 400 at once", resp.StatusCode, d.Round(time.Millisecond))
		}
	})
	f.done("GET with a body")
}

// zeroWindow: HTTP/2 connections that open 250 streams each for the archive with a flow-control
// window of 0, and never open it. The server takes at most --max-streams of them at a time, and
// cuts those off at the stall timeout: every stream is reset or the connection closed.
func zeroWindow(t *testing.T, s *served, w *watch, archive string, conns int, base int64) {
	f := &failures{t: t}
	const streams = 250
	bound := 3*hostileStallT + 5*time.Second
	parallel(conns, func(int) {
		c, err := hostileConn(t, s, "h2")
		if err != nil {
			f.add("dial: %v", err)
			return
		}
		defer c.Close()
		if c.ConnectionState().NegotiatedProtocol != "h2" {
			f.add("the server did not speak HTTP/2")
			return
		}
		c.SetDeadline(time.Now().Add(bound + 10*time.Second))
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for i := range streams {
			hb.Reset()
			for _, h := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", archive}} {
				enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
			}
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
				break
			}
		}
		start := time.Now()
		ended := map[uint32]bool{}
		for len(ended) < streams {
			fr2, err := fr.ReadFrame()
			if err != nil {
				break // the server closed the connection: every stream ended
			}
			switch fr2 := fr2.(type) {
			case *http2.SettingsFrame:
				if !fr2.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.RSTStreamFrame:
				ended[fr2.StreamID] = true
			case *http2.GoAwayFrame:
				// streams above the last one are not processed; the rest end before the close
				for id := fr2.LastStreamID + 2; id < 2*streams; id += 2 {
					ended[id] = true
				}
			case *http2.DataFrame:
				if fr2.StreamEnded() {
					ended[fr2.StreamID] = true
				}
			}
		}
		if d := time.Since(start); d > bound {
			f.add("HTTP/2 zero-window streams held %v (bound %v); %d of %d ended", d.Round(time.Millisecond), bound, len(ended), streams)
		}
	})
	if now := w.fds(); now > base+20 {
		f.add("after the zero-window connections the server holds %d descriptors (at rest %d)", now, base)
	}
	f.done("HTTP/2 zero window")
}

// hugePath: a 900 KB path and a 2 KB one are refused (431, 414) without being echoed, and the log
// carries neither whole.
func hugePath(t *testing.T, s *served) {
	for _, n := range []int{900 << 10, 2 << 10} {
		c, err := hostileConn(t, s, "http/1.1")
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		go io.WriteString(c, "GET "+helloPath+strings.Repeat("x", n)+".json HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%d-byte path: %v", n, err)
			c.Close()
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		c.Close()
		if (resp.StatusCode != 414 && resp.StatusCode != 431) || bytes.Contains(body, []byte("xxxxxxxx")) || len(body) > 512 {
			t.Errorf("%d-byte path: %d, %d-byte body %.100q; want 414 or 431, short, no echo", n, resp.StatusCode, len(body), body)
		}
	}
	if strings.Contains(s.logText(), strings.Repeat("x", 1000)) {
		t.Error("the log carries a long path whole")
	}
}

// indexFlood: clients over kept-alive connections ask for index.json as fast as they can; every
// request is answered 200 (a generation lists once) or 503, and none is left hanging.
func indexFlood(t *testing.T, s *served, clients, each int) {
	f := &failures{t: t}
	var ok atomic.Int64
	start := time.Now()
	parallel(clients, func(int) {
		c := caClient(t, s.CAFile)
		c.Timeout = 10 * time.Second
		for range each {
			code, _, err := getWith(c, s.URL, helloPath+"index.json")
			switch {
			case err != nil:
				f.add("index.json: %v", err)
			case code == 200:
				ok.Add(1)
			case code != 503:
				f.add("index.json: %d", code)
			}
		}
	})
	fmt.Printf("index.json flood: %d of %d answered 200 in %v\n", ok.Load(), clients*each, time.Since(start).Round(time.Millisecond))
	f.done("index.json flood")
}
