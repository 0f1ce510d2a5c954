// Package plugin launches OpenTofu providers over their native plugin protocol: the go-plugin
// handshake (magic cookie, protocol versions 5 and 6, automatic mutual TLS, unix sockets), a
// health check, the calls oprov makes (GetMetadata, GetProviderSchema, StopProvider) through
// gRPC stubs generated from proto/, graceful shutdown with a kill after a timeout, and the
// reattach configuration that hands a running provider to tofu or terraform.
//
// The provider process lifecycle lives here and nowhere else.
package plugin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oprov/oprov/pkg/plugin/tfplugin5"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
	"github.com/oprov/oprov/pkg/sandbox"
	"github.com/oprov/oprov/pkg/sandbox/hint"
)

// handshake is OpenTofu's and Terraform's go-plugin handshake for providers (format.md §3).
var handshake = goplugin.HandshakeConfig{
	MagicCookieKey:   "TF_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
}

// defaultStartTimeout is how long a provider has to complete the handshake.
const defaultStartTimeout = 10 * time.Second

// Options say how to start a provider.
type Options struct {
	Path string
	Args []string
	Env  []string // added to oprov's own environment
	// StartTimeout bounds the handshake (default defaultStartTimeout).
	StartTimeout time.Duration
	// Log, when set, receives the provider's own log lines (oprov -v).
	Log io.Writer
	// Debug, with Log, adds the lines a provider's SDK logs about every request and go-plugin's
	// own about starting and talking to it (oprov run -vv; OPROV_DEBUG_PLUGIN=1 does the same).
	Debug bool
	// Type is the provider's type, the last part of its address: its own logs are switched off
	// by TF_LOG_PROVIDER_<TYPE> when nobody reads them (see providerEnv). A group sets it.
	Type string
	// Protocols limits the protocol versions offered (default 5 and 6).
	Protocols []int
	// ForReattach serves without TLS, so that tofu or terraform can reattach to the provider
	// (they connect without a client certificate). The socket lives in a private directory
	// (mode 0700), which is what protects it; otherwise mutual TLS is negotiated automatically.
	ForReattach bool
	// DieWithParent has the kernel kill the provider when the process that started it dies, even
	// by SIGKILL, which leaves no chance to stop it in order (Linux only; elsewhere nothing is
	// added). A far side sets it: nothing of a provider may outlive the connection's host.
	DieWithParent bool
	// WorkDir is the provider's working directory, as tofu gives the providers it starts its own
	// (the configuration's directory, where relative paths such as ${path.module} point); empty:
	// oprov's.
	WorkDir string
	// Dir is the private directory (mode 0700) the provider's sockets and temporary files go
	// in; it is its TMPDIR. A group gives each member one inside its run's directory; when empty,
	// Start makes one and Stop removes it.
	Dir string
	// Sandbox, when set, confines the provider: it starts through SandboxExec (oprov's own
	// executable) run as `oprov __sandbox-exec`, which applies the spec to itself and then execs
	// the provider. Dir is added to the spec's writable paths (the provider's socket and
	// temporary files go there), and only the variables the spec passes through reach it.
	Sandbox     *sandbox.Spec
	SandboxExec string
	// Hint, when set, hears a suggestion for the sandbox block whenever the sandboxed provider's
	// stderr reports a permission error (see hint.Suggest).
	Hint func(string)
	// Open, when set, opens the executable at Path as it was checked (the cache's
	// OpenExecutable), or refuses: the provider is then exec'd from that descriptor where the
	// system allows (pinned_linux.go), so a file put in Path's place after the check never runs.
	Open func() (*os.File, error)
}

// Provider is a running provider.
type Provider struct {
	Path     string
	Protocol int // 5 or 6
	client   *goplugin.Client
	cmd      *exec.Cmd
	stderr   *tailBuffer
	v5       *client5
	v6       *client6
	conn     *grpc.ClientConn
	dir      string // the private directory (see Options.Dir)
	ownDir   bool   // Start made dir, and Stop removes it
	stopOnce sync.Once
	askOnce  sync.Once
	onAsk    func(method string, took time.Duration, err error) // hears of oprov's own StopProvider
	// TLS is true when the connection to the provider is TLS: negotiated mutual TLS, or a
	// provider that serves TLS on its own (see servertls.go).
	TLS       bool
	sandboxed bool
	remote    *remoteLink // set for a provider on a far side (remote.go): no process here
}

// command is the process that becomes the provider: the provider itself, or oprov's sandbox
// step that execs it once confined.
func command(opts Options, pinned *os.File) (*exec.Cmd, error) {
	if opts.Sandbox == nil {
		cmd := exec.Command(opts.Path, opts.Args...)
		if pinned != nil {
			runPinned(cmd, pinned)
		}
		return cmd, nil
	}
	if opts.SandboxExec == "" {
		return nil, fmt.Errorf("a sandbox is set but not the oprov executable that applies it")
	}
	spec := *opts.Sandbox
	spec.Write = append(slices.Clip(spec.Write), opts.Dir)
	// The exec step gets the checked executable as its descriptor 3 and execs that, as an
	// unsandboxed provider is (runPinned): a file put in the path's place never runs.
	pin := pinned != nil && pinnable(pinned)
	if pin {
		spec.ExecFD = 3
	}
	args, err := spec.Args(opts.Path, opts.Args)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(opts.SandboxExec, args...)
	if pin {
		cmd.ExtraFiles = []*os.File{pinned}
	}
	return cmd, nil
}

// grpcProvider dispenses the raw gRPC connection; oprov builds its own stubs on it.
type grpcProvider struct{ goplugin.Plugin }

func (grpcProvider) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error {
	return errors.New("oprov does not serve providers")
}

func (grpcProvider) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// Start launches the executable, completes the handshake, checks its health, and connects.
// Errors say whether it is not a plugin, speaks a protocol oprov does not, crashed (with its exit
// code and the tail of its stderr), or garbled the handshake.
func Start(ctx context.Context, opts Options) (*Provider, error) {
	st, err := os.Stat(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", opts.Path, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("provider %s is not an executable file", opts.Path)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	protocols := opts.Protocols
	if len(protocols) == 0 {
		protocols = []int{5, 6}
	}
	sets := map[int]goplugin.PluginSet{}
	for _, v := range protocols {
		sets[v] = goplugin.PluginSet{"provider": grpcProvider{}}
	}
	ownDir := opts.Dir == ""
	if ownDir {
		if opts.Dir, err = makePrivateDir(); err != nil {
			return nil, fmt.Errorf("provider %s: private directory: %w", opts.Path, err)
		}
	}
	var pinned *os.File
	if opts.Open != nil {
		pinned, err = opts.Open()
	}
	if pinned != nil {
		// Closed once the process has started (or failed to): the child holds its own copy.
		defer pinned.Close()
	}
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = command(opts, pinned)
	}
	if err != nil {
		if ownDir {
			os.RemoveAll(opts.Dir)
		}
		return nil, fmt.Errorf("provider %s: %w", opts.Path, err)
	}
	// The last value of a variable wins: the provider's sockets and temporary files go in the
	// private directory, whatever oprov's own environment says.
	cmd.Env = append(providerEnv(opts), "PLUGIN_UNIX_SOCKET_DIR="+opts.Dir, "TMPDIR="+opts.Dir)
	cmd.Dir = opts.WorkDir
	if opts.Sandbox != nil {
		ownSession(cmd)
	} else {
		ownGroup(cmd)
	}
	if opts.DieWithParent {
		dieWithParent(cmd)
	}
	p := &Provider{Path: opts.Path, cmd: cmd, stderr: &tailBuffer{max: 4096}, dir: opts.Dir, ownDir: ownDir, sandboxed: opts.Sandbox != nil}
	reattachTLS := p.newClient(opts, sets)
	if err := p.connect(opts, reattachTLS); err != nil {
		return nil, err
	}
	trackProvider(p) // no proxy takes its connections (peercred.go)
	return p, nil
}

// connect completes the handshake of the started p, dispenses its gRPC connection, makes the
// client for the protocol it negotiated, and checks its health; it stops p on any failure.
func (p *Provider) connect(opts Options, reattachTLS *tls.Config) error {
	rpc, err := p.client.Client()
	if err != nil {
		// Stop it first: go-plugin's Kill waits for its stderr goroutine, so the tail the error
		// quotes is complete.
		p.kill()
		return p.explainStart(err)
	}
	raw, err := rpc.Dispense("provider")
	if err != nil {
		p.kill()
		return fmt.Errorf("provider %s: %w", opts.Path, err)
	}
	p.conn = raw.(*grpc.ClientConn)
	p.Protocol = p.client.NegotiatedVersion()
	p.TLS = !opts.ForReattach || servesTLS(reattachTLS)
	switch p.Protocol {
	case 5:
		p.v5 = &client5{p.conn}
	case 6:
		p.v6 = &client6{p.conn}
	default:
		p.kill()
		return fmt.Errorf("provider %s negotiated protocol %d, which oprov does not speak (it speaks 5 and 6)", opts.Path, p.Protocol)
	}
	// go-plugin checks the plugin's gRPC health service (service "plugin") on connect; check
	// it again here so a provider that is up but unhealthy is caught before use.
	// A provider that does not serve the health service (the Python SDK tf) has answered a
	// gRPC call all the same.
	if err := rpc.Ping(); err != nil && status.Code(err) != codes.Unimplemented {
		p.kill()
		return fmt.Errorf("provider %s is not healthy: %w", opts.Path, err)
	}
	return nil
}

// newClient makes the go-plugin client for p.cmd, and returns the TLS configuration a start for
// reattaching uses (nil otherwise), whose RootCAs tell afterwards whether the provider serves TLS.
func (p *Provider) newClient(opts Options, sets map[int]goplugin.PluginSet) *tls.Config {
	var reattachTLS *tls.Config
	var dialOpts []grpc.DialOption
	if opts.ForReattach {
		reattachTLS = reattachTLSConfig()
		dialOpts = []grpc.DialOption{grpc.WithTransportCredentials(serverChosenTLS{reattachTLS})}
	}
	// go-plugin logs the provider's stderr lines through logger (parsed when they are JSON) and
	// copies the raw stream to Stderr: the user sees the former, the tail keeps the latter.
	logger := hclog.NewNullLogger()
	if opts.Log != nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: "provider", Output: opts.Log, Level: hclog.Trace})
		if !opts.debugLogs() {
			logger = providerLinesOnly{logger}
		}
	}
	p.client = goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: sets,
		Cmd:              p.cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         !opts.ForReattach,
		UnixSocketConfig: &goplugin.UnixSocketConfig{TempDir: opts.Dir},
		// p.cmd's environment already holds oprov's (providerEnv); go-plugin would append it
		// again after ours, and its TMPDIR would win over the private directory's.
		SkipHostEnv:     true,
		StartTimeout:    opts.StartTimeout,
		Logger:          logger,
		Stderr:          p.stderrSink(opts),
		TLSConfig:       reattachTLS,
		GRPCDialOptions: dialOpts,
		SyncStdout:      io.Discard,
		SyncStderr:      syncStderr(opts),
	})
	return reattachTLS
}

// explainStart turns go-plugin's start errors into ones that say what went wrong with the
// executable.
func (p *Provider) explainStart(err error) error {
	msg := err.Error()
	tail := strings.TrimSpace(p.stderr.String())
	withTail := func(s string) error {
		if tail != "" {
			s += "\nits stderr ended with:\n" + indent(tail)
			if hint, ok := hint.Suggest(tail); ok && p.sandboxed {
				s += "\n" + hint
			}
		}
		return fmt.Errorf("provider %s %s", p.Path, s)
	}
	switch {
	case strings.Contains(msg, "incompatible API version"):
		return fmt.Errorf("provider %s speaks a plugin protocol oprov does not (oprov speaks 5 and 6): %s", p.Path, msg)
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		line := strings.TrimPrefix(strings.SplitN(msg, "\n", 2)[0], "Unrecognized remote plugin message: ")
		if strings.Contains(msg, "Failed to read any lines") || line == "" {
			return withTail(p.exitNote("is not a plugin: it printed no handshake before exiting"))
		}
		return withTail(fmt.Sprintf("garbled the plugin handshake: it printed %q, not CORE|APP|NETWORK|ADDRESS|PROTOCOL", line))
	case strings.Contains(msg, "plugin exited before we could connect"):
		return withTail(p.exitNote("exited before completing the plugin handshake (is it a provider?)"))
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return withTail("is not a plugin, or is stuck: it printed no handshake within the start timeout")
	}
	return withTail(msg)
}

// exitNote adds the exit code when the process has ended.
func (p *Provider) exitNote(s string) string {
	// go-plugin waits for the process on its own goroutine; give it a moment to record the exit.
	for i := 0; i < 50 && p.cmd.ProcessState == nil; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if ps := p.cmd.ProcessState; ps != nil {
		return fmt.Sprintf("%s (%s)", s, ps.String())
	}
	return s
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// Pid is the provider's process ID.
func (p *Provider) Pid() int {
	if p.remote != nil { // the command that carries the connection; none for a shared one
		if p.remote.cmd == nil {
			return 0
		}
		return p.remote.cmd.Process.Pid
	}
	if rc := p.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Stop asks the provider to stop its work (StopProvider), then shuts the process down: go-plugin
// closes the connection and asks it to exit, and kills it after a grace period. Its unix socket
// is removed. Stop may be called more than once.
func (p *Provider) Stop(ctx context.Context) {
	p.stopOnce.Do(func() {
		p.askToStop(ctx)
		if p.remote != nil { // the far side stops the provider when the connection ends
			p.conn.Close()
			p.remote.close()
			return
		}
		addr := ""
		if rc := p.client.ReattachConfig(); rc != nil && rc.Addr != nil && rc.Addr.Network() == "unix" {
			addr = rc.Addr.String()
		}
		// go-plugin's Kill asks the provider to exit, kills it after two seconds, and then waits
		// until nothing holds its output pipes: a child the provider started may hold them for
		// ever. The wait is bounded; the provider's process group is killed after it either way.
		killed := make(chan struct{})
		go func() { p.client.Kill(); close(killed) }()
		select {
		case <-killed:
		case <-time.After(stopKillWait):
		}
		killGroup(p.cmd) // anything the provider started goes with it
		untrackProvider(p)
		if addr != "" {
			os.Remove(addr)
		}
		if p.ownDir {
			os.RemoveAll(p.dir)
		}
	})
}

// stopKillWait bounds Stop's wait for go-plugin's Kill (its two seconds of grace, then the
// provider's pipes); with askToStop's two seconds, a far side ends within remoteEndBound of its
// connection's end.
const stopKillWait = 2500 * time.Millisecond

// askToStop calls StopProvider (Stop in protocol 5) once, bounded in time, and tells onAsk.
func (p *Provider) askToStop(ctx context.Context) {
	p.askOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		start := time.Now()
		var method string
		var err error
		switch {
		case p.v6 != nil:
			method = "/tfplugin6.Provider/StopProvider"
			_, err = p.v6.StopProvider(ctx, &tfplugin6.StopProvider_Request{})
		case p.v5 != nil:
			method = "/tfplugin5.Provider/Stop"
			_, err = p.v5.Stop(ctx, &tfplugin5.Stop_Request{})
		}
		if p.onAsk != nil && method != "" {
			p.onAsk(method, time.Since(start), err)
		}
	})
}

// kill ends a provider that failed to start, with everything in its process group, without
// waiting on pipes its children may still hold.
func (p *Provider) kill() {
	killGroup(p.cmd)
	p.client.Kill()
	if p.ownDir {
		os.RemoveAll(p.dir)
	}
}

// Reattach is the TF_REATTACH_PROVIDERS entry for the running provider.
type Reattach struct {
	Protocol        string
	ProtocolVersion int
	Pid             int
	Test            bool
	Addr            ReattachAddr
}

// ReattachAddr is where the provider listens.
type ReattachAddr struct {
	Network string
	String  string
}

// ReattachConfig gives the entry that hands this provider to tofu or terraform. Test is set for
// protocol 6, or OpenTofu assumes protocol 5 (format.md §3).
func (p *Provider) ReattachConfig() Reattach {
	if p.remote != nil { // only ever handed over through a proxy, which gives its own address
		// The proxy tofu talks to lives in this process: tofu watches it, not the command.
		return Reattach{Protocol: string(goplugin.ProtocolGRPC), ProtocolVersion: p.Protocol, Pid: os.Getpid(), Test: true}
	}
	rc := p.client.ReattachConfig()
	return Reattach{
		Protocol:        string(rc.Protocol),
		ProtocolVersion: p.Protocol,
		Pid:             rc.Pid,
		Test:            true,
		Addr:            ReattachAddr{Network: rc.Addr.Network(), String: rc.Addr.String()},
	}
}

// stderrSink is where the provider's raw stderr goes: the tail an error quotes, and, for a
// sandboxed provider with opts.Hint, the reader of permission errors.
func (p *Provider) stderrSink(opts Options) io.Writer {
	if opts.Sandbox == nil || opts.Hint == nil {
		return p.stderr
	}
	return io.MultiWriter(p.stderr, &hint.LineHinter{Hint: opts.Hint, Dir: workDir(opts)})
}

// syncStderr is where what a go-plugin provider writes to os.Stderr once serving goes (go-plugin
// sends it over its gRPC stdio stream, not the process's stderr): nowhere, but for a sandboxed
// provider with opts.Hint, the reader of permission errors.
func syncStderr(opts Options) io.Writer {
	if opts.Sandbox == nil || opts.Hint == nil {
		return io.Discard
	}
	return &hint.LineHinter{Hint: opts.Hint, Dir: workDir(opts)}
}

// workDir is the provider's working directory, against which the relative paths its messages
// name are read.
func workDir(opts Options) string {
	if opts.WorkDir != "" {
		return opts.WorkDir
	}
	wd, _ := os.Getwd()
	return wd
}
