package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/yamux"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// A remote provider runs on another machine, the far side, reached by a command whose standard
// input and output carry the connection (ssh, kubectl exec -i, docker exec -i) and which runs
// `oprov provider host --stdio` there. The connection opens with a few JSON lines, then carries
// gRPC multiplexed by yamux (docs/remote.md):
//
//	far:  {"oprov_remote":2,"platform":"linux_amd64","source":true}   the hello
//	near: {"protocol":1,"address":...,"h1":[...],...}      the request (RemoteRequest)
//	far:  {"send_zip":true}                                 only when its cache lacks the zip;
//	near: SIZE bytes of the zip                             the near side then sends it
//	far:  {"ready":true,"plugin_protocol":6} or {"error":"..."}
//
// after which the near side opens yamux streams and the far side serves, on each, a proxy to the
// provider it launched. The far side stops the provider when the connection ends.

// RemoteProtocol is the version of that exchange this oprov speaks.
// 2: the request's sandbox paths are as written (~ and relative paths are the far side's), and
// the far side fits the request's sandbox inside its operator's.
const RemoteProtocol = 2

// RemoteHello is the far side's first line.
type RemoteHello struct {
	Protocol int    `json:"oprov_remote"`
	Platform string `json:"platform"`
	// Source says the far side understands a request for a provider built from source on the
	// near side (RemoteRequest.Source), which its configuration allows or refuses. A far side
	// of remote protocol 2 without it is an older release, which would take such a package for a
	// release: the near side does not ask it.
	Source bool `json:"source,omitempty"`
	// Launches says the far side shares one connection among several providers: it takes a
	// session request (RemoteRequest.Session), then launches a provider on each launch stream
	// (remotesession.go). A far side without it is an older release: each provider has a
	// connection of its own.
	Launches bool `json:"launches,omitempty"`
}

// maxRemotePlatform bounds the far side's platform string (OS_ARCH), which the near side builds
// for.
const maxRemotePlatform = 64

// RemoteRequest is what the near side asks the far side to run: a provider's package, the h1:
// hashes the near side's lock records for it, and the sandbox to run it under (the block as the
// near side's oprov.hcl declares it, opaque here), or none.
type RemoteRequest struct {
	Protocol int             `json:"protocol"`
	Address  string          `json:"address"`
	Version  string          `json:"version"`
	Platform string          `json:"platform"`
	Filename string          `json:"filename"`
	Zip      string          `json:"zip_digest"`
	Size     int64           `json:"size"`
	H1       []string        `json:"h1"`
	Sandbox  json.RawMessage `json:"sandbox,omitempty"`
	// Source says the package was built on the near side from source kept beside its
	// configuration: no release, no signature. The far side runs it only where its own
	// configuration allows source-built providers of that address.
	Source bool `json:"source,omitempty"`
	// Session asks for no provider now: the far side answers ready and serves launch and
	// provider streams on the connection (remotesession.go). Only to a far side whose hello
	// says Launches.
	Session bool `json:"session,omitempty"`
}

// remoteReply is a far side's answer to a request.
type remoteReply struct {
	SendZip  bool `json:"send_zip,omitempty"`
	Ready    bool `json:"ready,omitempty"`
	Protocol int  `json:"plugin_protocol,omitempty"`
	// Provider numbers the provider a launch stream started, for the streams that carry its
	// calls.
	Provider int    `json:"provider,omitempty"`
	Error    string `json:"error,omitempty"`
	// Full says a shared connection runs as many providers as it may: the start makes a
	// connection of its own.
	Full bool `json:"full,omitempty"`
}

// maxRemoteLine bounds one line of the opening exchange.
const maxRemoteLine = 1 << 20

// defaultRemoteStartTimeout bounds a remote start (connecting, sending the zip, launching).
const defaultRemoteStartTimeout = 2 * time.Minute

// RemoteOptions say how to reach a far side and what to ask it to run.
type RemoteOptions struct {
	// Name names the remote in messages: its block and program.
	Name    string
	Command []string
	// Request gives the request for the far side's platform (OS_ARCH).
	Request func(platform string) (*RemoteRequest, error)
	// Zip opens the package the last request named, for a far side that lacks it.
	Zip func() (io.ReadCloser, error)
	// Log, when set, receives what the far side writes to its stderr (oprov -v).
	Log io.Writer
	// Report, when set, is told once that the connection was lost, with the cause.
	Report       io.Writer
	StartTimeout time.Duration
	// HelloTimeout bounds the wait for the far side's hello (defaultRemoteHelloTimeout);
	// HelloSetting names where it is set, for the error that meets it.
	HelloTimeout time.Duration
	HelloSetting string
	// Share says the starts of one command (the process that started this one: tofu) share one
	// connection, kept by a broker process of oprov's (remotebroker.go), where this system
	// allows it; each start that cannot share makes a connection of its own.
	Share bool
}

// remoteLink is the near side's end of a connection: the command, its yamux session, and the tail
// of its stderr that errors quote.
type remoteLink struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // the command's output, read by open and then the session
	sess   *yamux.Session
	stderr *tailBuffer
	exited chan struct{}
	closed atomic.Bool // oprov ended the connection itself
	once   sync.Once
	// report hears, once, that the connection was lost (RemoteOptions.Report).
	report     io.Writer
	reportOnce sync.Once
	// log, with -v, hears what crossed the connection when it ends.
	log               io.Writer
	calls, sent, recv atomic.Int64
	// command is what was run; helloLate is set when the hello's bound ended the start, and
	// heard stops that bound once the hello has come.
	command   []string
	helloLate atomic.Bool
	heard     func() bool
	// On a shared connection (startShared) there is no command: launch is the provider's launch
	// stream, whose end stops it on the far side, gone is closed when that stream has ended,
	// and provider is the far side's number for it.
	launch   net.Conn
	gone     chan struct{}
	provider int
}

// withDefaults is o with the default bounds where it sets none.
func (o RemoteOptions) withDefaults() RemoteOptions {
	if o.StartTimeout == 0 {
		o.StartTimeout = defaultRemoteStartTimeout
	}
	if o.HelloTimeout == 0 {
		o.HelloTimeout = defaultRemoteHelloTimeout
	}
	return o
}

// startRemote starts the command, asks the far side to launch the provider, and connects to it
// through the connection. Errors name the remote and the cause, with the far side's last stderr
// lines.
func startRemote(ctx context.Context, opts RemoteOptions) (*Provider, error) {
	if len(opts.Command) == 0 {
		return nil, fmt.Errorf("%s: no command", opts.Name)
	}
	opts = opts.withDefaults()
	l, stdout, err := launchLink(opts)
	if err != nil {
		return nil, err
	}
	in := bufio.NewReaderSize(stdout, 64<<10)
	proto, err := l.openBounded(ctx, in, opts)
	if err != nil {
		l.abort()
		return nil, l.explain(err)
	}
	if err := l.startSession(in); err != nil {
		l.abort()
		return nil, l.explain(err)
	}
	conn, err := grpc.NewClient("passthrough:///remote",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return l.sess.Open() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
	if err != nil {
		l.abort()
		return nil, l.explain(err)
	}
	return newRemoteProvider(opts.Name, proto, conn, l)
}

// startSession makes the near side's yamux session over the connection, once it is open.
func (l *remoteLink) startSession(in *bufio.Reader) error {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.KeepAliveInterval = 10 * time.Second
	cfg.ConnectionWriteTimeout = 30 * time.Second
	cfg.MaxStreamWindowSize = 4 << 20
	// The near side opens every stream; one the far side opens is never accepted, and yamux
	// keeps what arrives on each it holds for accepting: one at most (the least it takes), the
	// others reset.
	cfg.AcceptBacklog = 1
	var err error
	l.sess, err = yamux.Client(&pipeConn{r: in, w: l.stdin, read: &l.recv, written: &l.sent}, cfg)
	return err
}

// launchLink starts the command whose standard input and output carry the connection, with its
// stderr kept (and, with -v, shown quoted), in a process group of its own.
func launchLink(opts RemoteOptions) (*remoteLink, *os.File, error) {
	cmd := exec.Command(opts.Command[0], opts.Command[1:]...)
	l := &remoteLink{name: opts.Name, cmd: cmd, stderr: &tailBuffer{max: 4096}, exited: make(chan struct{}), report: opts.Report, log: opts.Log, command: opts.Command}
	cmd.Stderr = l.stderr
	if opts.Log != nil {
		cmd.Stderr = io.MultiWriter(l.stderr, quotingWriter{opts.Log})
	}
	ownGroup(cmd) // a terminal's Ctrl-C reaches oprov, which ends the connection in order
	var err error
	if l.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, nil, err
	}
	// A pipe of our own, not StdoutPipe: Wait closes StdoutPipe's read end when the command
	// exits, and a read racing it then fails with "file already closed" instead of reading what
	// the command wrote and then EOF. Ours is closed when the link is done.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	l.stdout = stdout
	cmd.Stdout = w
	if opts.Log != nil {
		io.WriteString(opts.Log, connectingLine(opts.Name, opts.Command))
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		return nil, nil, fmt.Errorf("%s: starting %s: %w", opts.Name, opts.Command[0], err)
	}
	go func() { cmd.Wait(); close(l.exited) }()
	return l, stdout, nil
}

// openBounded runs the opening (open) under its bounds: the hello's, the whole start's and ctx;
// a bound that ends it is the error.
func (l *remoteLink) openBounded(ctx context.Context, in *bufio.Reader, opts RemoteOptions) (int, error) {
	timer := time.AfterFunc(opts.StartTimeout, func() { l.fail() })
	defer timer.Stop()
	hello := time.AfterFunc(opts.HelloTimeout, func() { l.helloLate.Store(true); l.fail() })
	defer hello.Stop()
	l.heard = hello.Stop
	stop := context.AfterFunc(ctx, func() { l.fail() })
	defer stop()
	proto, err := l.open(in, opts)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		} else if l.helloLate.Load() {
			err = &helloTimeout{within: opts.HelloTimeout, setting: opts.HelloSetting}
		} else if !timer.Stop() {
			err = fmt.Errorf("the far side did not become ready within %s", opts.StartTimeout)
		}
		return 0, err
	}
	return proto, nil
}

// open reads the hello, sends the request (and the zip when asked), and reads the answer: the
// plugin protocol the far side's provider speaks.
func (l *remoteLink) open(in *bufio.Reader, opts RemoteOptions) (int, error) {
	var hello RemoteHello
	if err := readLine(in, &hello); err != nil {
		if errors.Is(err, io.EOF) && l.launch != nil {
			// A launch stream the shared connection's far side closed at once: past its
			// operator's bound on streams at once (a host block's streams), or the connection
			// ended. A connection of the start's own says which.
			return 0, &notShared{errors.New("the shared connection's far side closed the launch stream before its hello (its bound on streams at once, a host block's streams, may be met)")}
		}
		if errors.Is(err, io.EOF) {
			note := l.exitNote()
			if l.cmd != nil && exitedSSHFailure(l.command, l.cmd) {
				return 0, &sshFailed{dest: sshDestination(l.command[1:])}
			}
			return 0, fmt.Errorf("the far side ended before it said hello%s: is oprov installed there, and does the command run `oprov provider host --stdio`?", note)
		}
		return 0, fmt.Errorf("the far side's hello: %w (does the command run `oprov provider host --stdio`?)", err)
	}
	if l.heard != nil && !l.heard() {
		return 0, errors.New("the hello came after its bound") // the bound has killed the command
	}
	if hello.Protocol != RemoteProtocol {
		return 0, fmt.Errorf("the far side speaks the remote protocol %d, this oprov speaks %d: install the same oprov release on both sides", hello.Protocol, RemoteProtocol)
	}
	if len(hello.Platform) > maxRemotePlatform {
		return 0, fmt.Errorf("the far side's platform is %d bytes long, beyond the %d a platform (OS_ARCH) may be", len(hello.Platform), maxRemotePlatform)
	}
	req, err := opts.Request(hello.Platform)
	if err != nil {
		return 0, err
	}
	if req.Session && !hello.Launches {
		return 0, errNoLaunches
	}
	if req.Source && !hello.Source {
		return 0, fmt.Errorf("%s is built from source here, and the far side's oprov (remote protocol %d, an older release) does not take providers built from source: install this oprov release there (its operator then allows the address with allow_source in a host block of its --config), or leave the provider out of the remote block", req.Address, hello.Protocol)
	}
	req.Protocol = RemoteProtocol
	if err := writeLine(l.stdin, req); err != nil {
		return 0, fmt.Errorf("sending the request: %w", err)
	}
	sent := false
	for {
		var r remoteReply
		if err := readLine(in, &r); err != nil {
			if errors.Is(err, io.EOF) {
				return 0, fmt.Errorf("the far side ended before it was ready%s", l.exitNote())
			}
			return 0, fmt.Errorf("the far side's answer: %w", err)
		}
		switch {
		case r.Full:
			return 0, &notShared{errors.New(r.Error)}
		case r.Error != "":
			return 0, &farRefusal{r.Error}
		case r.SendZip:
			if sent {
				return 0, fmt.Errorf("the far side asked for the package twice")
			}
			sent = true
			if err := l.sendZip(opts, req.Size); err != nil {
				return 0, err
			}
		case r.Ready:
			l.provider = r.Provider
			return r.Protocol, nil
		default:
			return 0, fmt.Errorf("the far side's answer says nothing oprov understands")
		}
	}
}

// sendZip copies the package to the far side: exactly size bytes.
func (l *remoteLink) sendZip(opts RemoteOptions, size int64) error {
	zr, err := opts.Zip()
	if err != nil {
		return err
	}
	defer zr.Close()
	if _, err := io.CopyN(l.stdin, zr, size); err != nil {
		return fmt.Errorf("sending the package: %w", err)
	}
	return nil
}

// exitNote says how the command ended, once it has, after a moment to let it.
func (l *remoteLink) exitNote() string {
	if l.cmd == nil {
		return ""
	}
	select {
	case <-l.exited:
	case <-time.After(2 * time.Second):
		return ""
	}
	if ps := l.cmd.ProcessState; ps != nil {
		return " (" + ps.String() + ")"
	}
	return ""
}

// explain names the remote and adds the far side's last stderr lines.
func (l *remoteLink) explain(err error) error {
	var refusal *farRefusal
	if errors.As(err, &refusal) {
		return fmt.Errorf("%s: %w%s", l.name, err, l.tailWithout(refusal.msg))
	}
	var ssh *sshFailed
	if errors.As(err, &ssh) {
		return fmt.Errorf("%s: %w%s", l.name, err, strings.Replace(l.tail(), "the far side's stderr ended with:", "ssh's stderr ended with:", 1))
	}
	return fmt.Errorf("%s: %w%s", l.name, err, l.tail())
}

func (l *remoteLink) tail() string { return l.tailWithout("") }

// tailWithout is tail less the lines that repeat the far side's refusal (see withoutRefusal).
func (l *remoteLink) tailWithout(refusal string) string {
	// What the command wrote last may still be on its way through the pipe.
	select {
	case <-l.exited:
	case <-time.After(200 * time.Millisecond):
	}
	t := quoteText(withoutRefusal(strings.TrimSpace(l.stderr.String()), refusal))
	if t == "" {
		return ""
	}
	return "\nthe far side's stderr ended with:\n" + indent(t)
}

// lost turns a call's error into one that names the remote and the cause when the connection is
// gone, and leaves it alone otherwise.
func (l *remoteLink) lost(err error) error {
	if err == nil || l.closed.Load() {
		return err
	}
	cause := "the connection ended"
	if l.launch != nil {
		select {
		case <-l.gone:
			cause = "this command's shared connection ended"
		case <-time.After(500 * time.Millisecond):
			return err
		}
		return l.report1(fmt.Sprintf("%s: %s, so the call did not complete", l.name, cause))
	}
	if l.sess == nil || !l.sess.IsClosed() {
		return err
	}
	select {
	case <-l.exited:
		cause = "the connection ended: " + l.cmd.ProcessState.String()
		if exitedSSHFailure(l.command, l.cmd) {
			cause = "ssh's connection failed (exit 255)"
		}
	case <-time.After(500 * time.Millisecond):
	}
	return l.report1(fmt.Sprintf("%s: %s, so the call did not complete%s", l.name, cause, l.tail()))
}

// report1 tells the report, once, that the connection was lost, and gives the call's error.
func (l *remoteLink) report1(msg string) error {
	l.reportOnce.Do(func() {
		if l.report != nil {
			fmt.Fprintf(l.report, "oprov: %s\n", msg)
		}
	})
	// Not Unavailable: tofu words that as a crash and leaves the message out.
	return status.Error(codes.Aborted, msg)
}

// fail ends a start that is taking too long or was cancelled: the command is killed, which ends
// every read of its output.
func (l *remoteLink) fail() {
	if l.launch != nil {
		l.launch.Close()
		return
	}
	killGroup(l.cmd)
}

// close ends the connection: the far side sees its input end and stops the provider. The command
// has a moment to end on its own before it is killed.
func (l *remoteLink) close() { l.closeWithin(5 * time.Second) }

// abort ends a connection that failed to open: the command has a second to end on its own.
func (l *remoteLink) abort() { l.closeWithin(time.Second) }

func (l *remoteLink) closeWithin(grace time.Duration) {
	l.once.Do(func() {
		if l.log != nil && (l.sess != nil || l.provider != 0) {
			fmt.Fprintf(l.log, "oprov: %s: %d calls, %d bytes sent, %d received\n", l.name, l.calls.Load(), l.sent.Load(), l.recv.Load())
		}
		l.closed.Store(true)
		if l.launch != nil {
			l.launch.Close()
			return
		}
		if l.sess != nil {
			l.sess.Close()
		}
		l.stdin.Close()
		select {
		case <-l.exited:
		case <-time.After(grace):
			killGroup(l.cmd)
			<-l.exited
		}
		l.stdout.Close()
	})
}

// pipeConn is a connection made of a reader and a writer: the command's output and input. It
// counts the bytes each way when given counters.
type pipeConn struct {
	r             io.Reader
	w             io.WriteCloser
	read, written *atomic.Int64
	// closeRead, when set, is closed with the connection, ending a read in progress.
	closeRead io.Closer
}

func (c *pipeConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if c.read != nil {
		c.read.Add(int64(n))
	}
	return n, err
}

func (c *pipeConn) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	if c.written != nil {
		c.written.Add(int64(n))
	}
	return n, err
}

func (c *pipeConn) Close() error {
	if c.closeRead != nil {
		c.closeRead.Close()
	}
	return c.w.Close()
}

func readLine(in *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, isPrefix, err := in.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, chunk...)
		if len(line) > maxRemoteLine {
			return fmt.Errorf("a line longer than %d bytes", maxRemoteLine)
		}
		if !isPrefix {
			break
		}
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("not a line of oprov's remote protocol: %q", truncate(string(line), 200))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// RemoteHost is the far side's end of a connection, on its standard input and output.
type RemoteHost struct {
	In       io.Reader
	Out      io.WriteCloser
	Platform string
	// Source says this far side takes requests for providers built from source (its Launch
	// decides which it allows); the hello tells the near side so.
	Source bool
	// Launch makes the request's provider ready and says how to start it. zip, which it calls at
	// most once and only when it lacks the package, asks the near side for the zip and copies
	// its bytes to w.
	Launch func(ctx context.Context, req *RemoteRequest, zip func(w io.Writer) error) (Options, error)
	// OpenTimeout bounds the opening: from the hello to the ready line (reading the request,
	// receiving the zip, launching); 0 means defaultRemoteStartTimeout, the near side's own bound.
	OpenTimeout time.Duration
	// Streams bounds the streams the near side may have open at once on the connection (0:
	// defaultRemoteStreams). Each serves at most defaultRemoteCalls calls at once.
	Streams int
	// KeepAlive is how often the far side pings a near side that says nothing (0:
	// defaultRemoteKeepAlive); a ping unanswered within three of these ends the connection, so a
	// near side gone silently (its network dropped) is given up within four.
	KeepAlive time.Duration
	// Hangup, when set, is closed once the near side's end of Out is gone (WatchHangup): the
	// connection ends then, not at the next write, which the keepalive makes at the latest.
	Hangup <-chan struct{}
}

// remoteEndBound is docs/remote.md's bound: once its connection has ended (its input closed, its
// output no longer read, or both), the far side stops its provider, kills the provider's process
// group, and ends within it (askToStop's two seconds, then stopKillWait).
const remoteEndBound = 5 * time.Second

// defaultRemoteKeepAlive: a far side whose near side went silently ends within 40 seconds.
const defaultRemoteKeepAlive = 10 * time.Second

// defaultRemoteStreams is how many streams a near side may have open at once on one connection:
// the near side opens one, and another when gRPC reconnects.
const defaultRemoteStreams = 8

// defaultRemoteCalls is how many calls a near side may have in flight at once on one stream (tofu
// runs ten at a time by default).
const defaultRemoteCalls = 256

// Serve says hello, reads the request, launches the provider, and serves it on the connection
// until the connection ends (or ctx does), then stops it. A session request instead makes the
// connection one that launches a provider per launch stream (serveSession). An error is also sent
// to the near side.
func (h *RemoteHost) Serve(ctx context.Context) error {
	in := bufio.NewReaderSize(h.In, 64<<10)
	if err := writeLine(h.Out, RemoteHello{Protocol: RemoteProtocol, Platform: h.Platform, Source: h.Source, Launches: true}); err != nil {
		return err
	}
	p, session, err := h.openBounded(ctx, in, h.Out, true)
	if err != nil {
		return err
	}
	if session {
		if err := writeLine(h.Out, remoteReply{Ready: true}); err != nil {
			return err
		}
		return h.serveSession(ctx, in)
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), remoteEndBound)
	defer cancel()
	defer p.Stop(stopCtx)
	if err := writeLine(h.Out, remoteReply{Ready: true, Protocol: p.Protocol}); err != nil {
		return err
	}
	return h.serveCalls(ctx, in, p)
}

// openBounded runs an opening (open) under the opening's bound, writing its refusal to out. The
// opening runs apart, so that a near side that stops sending (a read nothing can interrupt) is
// given up at the bound; a provider it launches after that is stopped.
func (h *RemoteHost) openBounded(ctx context.Context, in *bufio.Reader, out io.Writer, sessionOK bool) (*Provider, bool, error) {
	bound := h.OpenTimeout
	if bound == 0 {
		bound = defaultRemoteStartTimeout
	}
	type opened struct {
		p                *Provider
		err              error
		session, refused bool
	}
	result := make(chan opened, 1)
	go func() {
		p, session, refused, err := h.open(ctx, in, out, sessionOK)
		result <- opened{p, err, session, refused}
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case o := <-result:
		if o.err != nil {
			if o.refused {
				writeLine(out, remoteReply{Error: o.err.Error()})
			}
			return nil, false, o.err
		}
		return o.p, o.session, nil
	case <-timer.C:
		go func() {
			if o := <-result; o.p != nil {
				stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
				defer cancel()
				o.p.Stop(stopCtx)
			}
		}()
		err := fmt.Errorf("the near side did not finish the opening (request, package, launch) within %s", bound)
		writeLine(out, remoteReply{Error: err.Error()})
		return nil, false, err
	}
}

// serveCalls serves the near side's calls to p over yamux-multiplexed gRPC until the session
// ends: the near side closed it, or went away.
func (h *RemoteHost) serveCalls(ctx context.Context, in *bufio.Reader, p *Provider) error {
	sess, err := h.session(ctx, in, 4<<20)
	if err != nil {
		return err
	}
	srv := providerServer(p)
	go func() {
		<-sess.CloseChan()
		srv.Stop()
	}()
	streams := h.Streams
	if streams == 0 {
		streams = defaultRemoteStreams
	}
	srv.Serve(boundStreams(sess, streams)) // returns once the session ends: the near side closed it, or went away
	return nil
}

// providerServer is the gRPC server that hands each call on a connection's streams to p.
func providerServer(p *Provider) *grpc.Server {
	x := &Proxy{p: p}
	return grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(x.handle),
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage), grpc.MaxConcurrentStreams(defaultRemoteCalls))
}

// session is the far side's yamux session over the connection, closed when ctx ends or the near
// side hangs up, and by its keepalive when the near side goes silent. window bounds what a
// stream may hold unread.
func (h *RemoteHost) session(ctx context.Context, in *bufio.Reader, window uint32) (*yamux.Session, error) {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.KeepAliveInterval = h.KeepAlive
	if cfg.KeepAliveInterval == 0 {
		cfg.KeepAliveInterval = defaultRemoteKeepAlive
	}
	cfg.ConnectionWriteTimeout = 3 * cfg.KeepAliveInterval
	cfg.MaxStreamWindowSize = window
	// Streams waiting to be accepted beyond these are reset by yamux; boundStreams refuses the
	// ones past the bound on open streams.
	cfg.AcceptBacklog = 16
	// The session reads through a pipe of its own, which closing it closes: a read of standard
	// input that nothing ends (a near side gone silently, its network dropped) must not hold the
	// session's close, and with it the provider, past the keepalive's verdict. The read left
	// blocked ends with the process.
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, in)
		pw.CloseWithError(err)
	}()
	sess, err := yamux.Server(&pipeConn{r: pr, w: h.Out, closeRead: pr}, cfg)
	if err != nil {
		pr.Close()
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-sess.CloseChan():
		case <-h.Hangup:
		}
		sess.Close()
	}()
	return sess, nil
}

// open reads the request and launches its provider, or, for a session request where sessionOK,
// launches nothing and says session. refused says the error is for the near side to hear.
func (h *RemoteHost) open(ctx context.Context, in *bufio.Reader, out io.Writer, sessionOK bool) (p *Provider, session, refused bool, err error) {
	var req RemoteRequest
	if err := readLine(in, &req); err != nil {
		return nil, false, false, fmt.Errorf("reading the request: %w", err)
	}
	if req.Protocol != RemoteProtocol {
		return nil, false, true, fmt.Errorf("the near side speaks the remote protocol %d, this oprov speaks %d: install the same oprov release on both sides", req.Protocol, RemoteProtocol)
	}
	if req.Session {
		if !sessionOK {
			return nil, false, true, errors.New("a session request on a launch stream: a session is asked for once, at the connection's opening")
		}
		return nil, true, false, nil
	}
	asked := false
	zip := func(w io.Writer) error {
		if asked {
			return errors.New("the package was asked for twice")
		}
		asked = true
		if err := writeLine(out, remoteReply{SendZip: true}); err != nil {
			return err
		}
		n, err := io.CopyN(w, in, req.Size)
		if err != nil {
			return fmt.Errorf("receiving the package (%d of %d bytes): %w", n, req.Size, err)
		}
		return nil
	}
	opts, err := h.Launch(ctx, &req, zip)
	if err != nil {
		return nil, false, true, err
	}
	opts.ForReattach = true
	if p, err = Start(ctx, opts); err != nil {
		return nil, false, true, err
	}
	return p, false, false, nil
}

// rawProvider is the plugin a remote provider's launcher serves: nothing of its own, every
// provider call going to the proxy's handler.
type rawProvider struct{ goplugin.Plugin }

func (rawProvider) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error { return nil }

func (rawProvider) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("oprov serves this provider, it is not its client")
}

// ServeRemote is a remote provider as tofu launches it after `oprov init`: it reaches the far
// side (m.Remote), then serves tofu over the plugin protocol (go-plugin's handshake on stdout,
// mutual TLS as tofu asks), every call going through a proxy with m's middleware to the far
// side, until tofu shuts it down; then it ends the connection, and the far side stops the
// provider. A start that fails is said on stdout too, where tofu quotes it.
func ServeRemote(ctx context.Context, m Member) error {
	p, err := startAny(ctx, *m.Remote)
	if err != nil {
		fmt.Println(strings.SplitN(err.Error(), "\n", 2)[0])
		return err
	}
	defer p.Stop(context.Background())
	var mw Middleware
	if m.Middleware != nil {
		if mw, err = m.Middleware(p); err != nil {
			fmt.Println(strings.SplitN(err.Error(), "\n", 2)[0])
			return err
		}
	}
	if m.Wrap != nil {
		mw = m.Wrap(mw)
	}
	if mw != nil {
		p.onAsk = mw.Own
	}
	x := &Proxy{p: p, mw: mw}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{p.Protocol: {"provider": rawProvider{}}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(x.handle),
				grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))...)
		},
		Logger: hclog.NewNullLogger(),
	})
	return nil
}
