package plugin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oprov/oprov/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// The broker. The starts of one command (tofu's, after `oprov init`, each a launcher process of
// its own) share one connection, which a broker process keeps: the first start makes it, it
// opens the connection (a session, remotesession.go), and every start, its own included, asks it
// for streams. It ends once the command has ended and no start uses it, or when the connection
// does.
//
// Who may use it. The broker listens on an abstract unix socket, whose name is derived from a
// secret of 32 random bytes, and proves, and asks each client to prove, knowledge of that secret
// (HMAC-SHA256 over both sides' nonces) before anything else; both ends also check that the other
// runs as this user (SO_PEERCRED) and is confined no more than itself (peerIsUs: a sandboxed
// provider whose sandbox may write the runtime directory can plant a secret of its own and listen
// at its socket, and is refused there). The secret is kept in a file of mode 0600 in a directory of
// mode 0700 of this user's (runtimeDir), which a sandboxed provider is not granted: Landlock
// governs reading it, where it does not govern connecting to a socket by its path. A sandboxed
// provider cannot reach an abstract socket made outside its sandbox at all (Landlock's scoping,
// pkg/sandbox), cannot learn the name, and cannot pass for the broker: a socket it binds under a
// name it guessed cannot prove the secret. The scoping is what holds even when a sandbox may read
// the runtime directory, so on a kernel without it (a best_effort sandbox drops it) no start
// shares a connection. A process of this user outside any sandbox can read
// the secret, as it can read the user's ssh keys: it gains nothing it did not have.

// shareParent is the command whose starts share a connection: the process that started this
// one (tofu).
var shareParent = os.Getppid

// brokerAuthTimeout bounds the proof of the secret, each way.
const brokerAuthTimeout = 5 * time.Second

// brokerSpawnBound bounds the start of a broker, until it listens.
const brokerSpawnBound = 10 * time.Second

// brokerClients bounds the clients a broker serves at once.
const brokerClients = 64

// brokerGrace: once the command has ended, the broker ends within this even if a start is still
// connected.
var brokerGrace = 10 * time.Second

// brokerIdle: a broker no start has used for this long ends even if its command still runs.
const brokerIdle = 30 * time.Minute

// brokerStatus is the broker's answer once a client has proven the secret: the shared connection
// is open, or why not. Fallback says the far side cannot share (an older release): the start
// makes a connection of its own.
type brokerStatus struct {
	OK       bool   `json:"ok,omitempty"`
	Error    string `json:"error,omitempty"`
	Fallback bool   `json:"fallback,omitempty"`
}

// sharedDialer gives the dialer of this command's shared connection: the broker's, started
// here when this is the command's first start.
func sharedDialer(ctx context.Context, opts RemoteOptions) (streamDialer, error) {
	// Without Landlock's scoping (a best_effort sandbox on an older kernel) a sandboxed provider
	// reaches the broker's socket, and only the secret's file stands in its way: a sandbox that
	// may read the runtime directory (or /tmp, or $XDG_RUNTIME_DIR) would hand it the user's
	// remote providers. There, each start connects on its own.
	if !sandbox.Probe().ScopesAbstractSockets() {
		return nil, &notShared{errors.New("this kernel lacks Landlock's scoping of abstract unix sockets (ABI 6, Linux 6.12), which keeps sandboxed providers from the broker's socket")}
	}
	dir, err := runtimeDir()
	if err != nil {
		return nil, &notShared{err}
	}
	parent := shareParent()
	started := procStarted(parent)
	if started == "" {
		return nil, &notShared{fmt.Errorf("the start time of process %d (the command) cannot be read", parent)}
	}
	wd, _ := os.Getwd()
	key, _ := json.Marshal([]any{started, wd, opts.Name, opts.Command, opts.HelloTimeout, opts.StartTimeout})
	sum := sha256.Sum256(key)
	file := filepath.Join(dir, fmt.Sprintf("remote-%d-%s", parent, hex.EncodeToString(sum[:12])))
	waited := false
	for try := 0; try < 2; try++ {
		secret, made, hold, err := secretFor(file)
		if err != nil {
			return nil, &notShared{err}
		}
		if made {
			if opts.Log != nil {
				io.WriteString(opts.Log, connectingLine(opts.Name, opts.Command))
			}
			spec := brokerSpec{Secret: secret, Name: opts.Name, Command: opts.Command, StartTimeout: opts.StartTimeout,
				HelloTimeout: opts.HelloTimeout, HelloSetting: opts.HelloSetting, Parent: parent, Started: started, File: file}
			err := spawnBroker(spec)
			hold.Close() // the lock that said this start was starting the broker
			if err != nil {
				removeIfSame(file, secret)
				return nil, &notShared{err}
			}
		}
		dial := func(hdr streamHeader) (net.Conn, error) { return dialBroker(secret, hdr, opts.StartTimeout) }
		// The first stream is the proof that the broker is there: a file left by a broker that
		// ended without removing it is removed, and the start makes the next one.
		c, err := dial(streamHeader{Launch: true})
		if err == nil {
			first := c
			var once sync.Once
			return func(hdr streamHeader) (net.Conn, error) {
				var c net.Conn
				once.Do(func() { c, first = first, nil })
				if c != nil && hdr.Launch {
					return c, nil
				}
				if c != nil {
					c.Close()
				}
				return dial(hdr)
			}, nil
		}
		var refused *brokerRefusal
		if errors.As(err, &refused) {
			return nil, err
		}
		if !made && errors.Is(err, syscall.ECONNREFUSED) {
			// The start that made the file may still be starting its broker: it holds the
			// file's lock until its broker listens (or failed to), and then it is dialed again.
			// A file no start holds is left by a broker that is gone.
			if !waited && waitForMaker(file) {
				waited = true
				try--
				continue
			}
			removeIfSame(file, secret)
			continue
		}
		return nil, &notShared{err}
	}
	return nil, &notShared{errors.New("the command's broker ended as this start began")}
}

// brokerRefusal is the broker's word that the shared connection could not be opened (the far
// side's error): a connection of the start's own would fail alike.
type brokerRefusal struct{ msg string }

func (e *brokerRefusal) Error() string { return e.msg }

// runtimeDir is this user's private directory for brokers' secrets: $XDG_RUNTIME_DIR/oprov, or
// oprov-UID in the temporary directory; made with mode 0700 and refused unless it is a
// directory (not a link) of this user's that no one else may enter, reached through directories
// no one else can change (privateAbove).
func runtimeDir() (string, error) {
	base := os.Getenv("XDG_RUNTIME_DIR")
	name := "oprov"
	if base == "" || !filepath.IsAbs(base) {
		base = os.TempDir()
		name = "oprov-" + strconv.Itoa(os.Getuid())
	}
	base, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", err
	}
	if err := privateAbove(base); err != nil {
		return "", err
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Getuid() || st.Mode&0o077 != 0 {
		return "", fmt.Errorf("%s is not a private directory of this user's (a directory of mode 0700 that it owns, not a link): remove it, and oprov makes it again", dir)
	}
	return dir, nil
}

// privateAbove refuses dir (with no link on its way) unless it and every directory above it are
// this user's or root's and writable by no one else, or sticky: another user who could write one
// of them could rename what is below it away and put a link in its place.
func privateAbove(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return err
		}
		if int(st.Uid) != os.Getuid() && st.Uid != 0 || st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
			return fmt.Errorf("%s, on the way to oprov's runtime directory, can be changed by another user (owner %d, mode %04o): set XDG_RUNTIME_DIR or TMPDIR to a directory of this user's", d, st.Uid, st.Mode&0o7777)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// secretFor reads the secret in file, or makes it (made) when there is none: written whole under
// another name, locked (hold, until its broker listens: waitForMaker), then linked to file, which
// fails when another start made it first.
func secretFor(file string) (secret []byte, made bool, hold *os.File, err error) {
	if s, err := readSecret(file); err == nil {
		return s, false, nil, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, nil, err
	}
	sweep(filepath.Dir(file))
	secret = make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, false, nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".new-")
	if err != nil {
		return nil, false, nil, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(secret))
	if err == nil {
		err = unix.Flock(int(tmp.Fd()), unix.LOCK_EX)
	}
	if err == nil {
		err = os.Link(tmp.Name(), file)
	}
	if err != nil {
		tmp.Close()
		if errors.Is(err, os.ErrExist) {
			s, err := readSecret(file)
			return s, false, nil, err
		}
		return nil, false, nil, err
	}
	return secret, true, tmp, nil
}

// waitForMaker says whether file was locked by the start that made it (starting its broker), once
// that start let go, within the bound on a broker's start.
func waitForMaker(file string) bool {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	held := false
	for deadline := time.Now().Add(brokerSpawnBound + time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			return held
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return false
		}
		held = true
	}
	return false
}

// readSecret reads a secret file: a regular file of this user's, mode 0600, not a link.
func readSecret(file string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Getuid() || st.Mode&0o077 != 0 {
		return nil, fmt.Errorf("%s is not a secret of this user's (a file of mode 0600 that it owns): remove it", file)
	}
	b, err := io.ReadAll(io.LimitReader(f, 128))
	if err != nil {
		return nil, err
	}
	s, err := hex.DecodeString(string(b))
	if err != nil || len(s) != 32 {
		return nil, fmt.Errorf("%s does not hold a broker's secret: remove it", file)
	}
	return s, nil
}

// removeIfSame removes file if it still holds secret.
func removeIfSame(file string, secret []byte) {
	if s, err := readSecret(file); err == nil && bytes.Equal(s, secret) {
		os.Remove(file)
	}
}

// sweep removes the secrets of brokers whose command is gone (a broker killed before it could).
func sweep(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		f := strings.SplitN(e.Name(), "-", 3)
		if len(f) != 3 || f[0] != "remote" {
			continue
		}
		if pid, err := strconv.Atoi(f[1]); err == nil && pid > 0 && unix.Kill(pid, 0) == unix.ESRCH {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// procStarted is a process's start time (in clock ticks since boot), "" when it cannot be read.
func procStarted(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return ""
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 20 {
		return ""
	}
	return string(f[19]) // field 22, counted from the state (field 3)
}

// socketName is the broker's abstract socket for a secret.
func socketName(secret []byte) string {
	sum := sha256.Sum256(append([]byte("oprov remote broker socket\x00"), secret...))
	return "@oprov-remote-" + hex.EncodeToString(sum[:16])
}

// proof is one side's proof of the secret over both nonces.
func proof(secret []byte, side string, nonces ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("oprov remote broker " + side + "\x00"))
	for _, n := range nonces {
		m.Write(n)
	}
	return m.Sum(nil)
}

// spawnBroker starts the broker, in a session of its own so that no terminal's signal ends it,
// and waits until it listens.
func spawnBroker(spec brokerSpec) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, RemoteBrokerCommand)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting oprov's broker: %w", err)
	}
	go cmd.Wait()
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(io.LimitReader(out, 4096)).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		if line != "listening" {
			cmd.Process.Kill()
			return fmt.Errorf("oprov's broker did not start: %s", quoteText(line))
		}
		return nil
	case <-time.After(brokerSpawnBound):
		cmd.Process.Kill()
		return fmt.Errorf("oprov's broker did not start within %s", brokerSpawnBound)
	}
}

// dialBroker connects to the broker, proves the secret and has the broker prove it, reads its
// status, and opens a stream beginning with hdr.
func dialBroker(secret []byte, hdr streamHeader, wait time.Duration) (net.Conn, error) {
	c, err := net.Dial("unix", socketName(secret))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (net.Conn, error) { c.Close(); return nil, err }
	pid, err := peerIsUs(c)
	if err != nil {
		return fail(err)
	}
	if !sameProgram(pid) {
		return fail(fmt.Errorf("process %d at the broker's socket does not run this oprov", pid))
	}
	c.SetDeadline(time.Now().Add(brokerAuthTimeout))
	ns := make([]byte, 32)
	if _, err := io.ReadFull(c, ns); err != nil {
		return fail(fmt.Errorf("the broker's nonce: %w", err))
	}
	nc := make([]byte, 32)
	rand.Read(nc)
	if _, err := c.Write(append(nc, proof(secret, "client", ns, nc)...)); err != nil {
		return fail(err)
	}
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, got); err != nil {
		return fail(fmt.Errorf("the broker's proof: %w", err))
	}
	if !hmac.Equal(got, proof(secret, "server", ns, nc)) {
		return fail(errors.New("the process at the broker's socket could not prove this command's secret"))
	}
	c.SetDeadline(time.Now().Add(wait))
	in := bufio.NewReader(c)
	var st brokerStatus
	if err := readLine(in, &st); err != nil {
		return fail(fmt.Errorf("the broker's status: %w", err))
	}
	c.SetDeadline(time.Time{})
	switch {
	case st.Fallback:
		return fail(errors.New(st.Error))
	case !st.OK:
		return fail(&brokerRefusal{st.Error})
	}
	if err := writeLine(c, hdr); err != nil {
		return fail(err)
	}
	return &bufferedConn{Conn: c, r: in}, nil
}

// peerIsUs checks that the process at the other end of c runs as this user, and is confined no
// more than this one, and gives its pid: a sandboxed provider (pkg/sandbox always sets
// no_new_privs, and adds a seccomp filter) is refused whether it connects or listens. One whose
// sandbox may write the runtime directory can put a secret of its own in a command's secret file
// and listen at that secret's socket (Landlock scopes connecting, not binding): the secret then
// proves nothing, who listens does. The pidfd (SO_PEERPIDFD) makes sure the status read is that
// process's.
func peerIsUs(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr, pidfdErr error
	pidfd := -1
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		pidfd, pidfdErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	if pidfdErr != nil {
		return 0, fmt.Errorf("which process is at the other end (SO_PEERPIDFD): %w", pidfdErr)
	}
	defer unix.Close(pidfd)
	if int(cred.Uid) != os.Getuid() {
		return 0, fmt.Errorf("process %d at the other end runs as user %d, not this one", cred.Pid, cred.Uid)
	}
	theirs, err := confinement(strconv.Itoa(int(cred.Pid)))
	if err != nil {
		return 0, err
	}
	ours, err := confinement("self")
	if err != nil {
		return 0, err
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return 0, fmt.Errorf("process %d at the other end has ended", cred.Pid)
	}
	if theirs != ours {
		return 0, fmt.Errorf("process %d at the other end is confined more than this one (%s; here %s): a sandboxed provider, not oprov", cred.Pid, theirs, ours)
	}
	return int(cred.Pid), nil
}

// sameProgram says whether process pid runs this process's own executable (the same file).
func sameProgram(pid int) bool {
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return false
	}
	other, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && os.SameFile(self, other)
}

// startOf says why process pid may not use the broker of the command parent (started at
// started), or "" when it may: the command itself, or a process of this oprov's whose parent is
// the command (a start: tofu runs the launcher, which becomes oprov). A provider the command
// started runs another program, and what such a provider starts has another parent: holding
// the secret is not enough for either.
func startOf(pid, parent int, started string) string {
	if procStarted(parent) != started {
		return "the command has ended"
	}
	if pid == parent {
		return ""
	}
	if parentPid(pid) != parent {
		return fmt.Sprintf("process %d was not started by the command (process %d)", pid, parent)
	}
	if !sameProgram(pid) {
		return fmt.Sprintf("process %d does not run this oprov", pid)
	}
	return ""
}

// confinement is what /proc says of a process's confinement: its no_new_privs and the number of
// its seccomp filters, which a sandbox sets and adds to, and none of its children can undo.
func confinement(pid string) (string, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return "", err
	}
	var nnp, filters string
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "NoNewPrivs":
			nnp = strings.TrimSpace(v)
		case "Seccomp_filters":
			filters = strings.TrimSpace(v)
		}
	}
	if nnp == "" || filters == "" {
		return "", fmt.Errorf("/proc/%s/status does not say the process's no_new_privs and seccomp filters", pid)
	}
	return "no_new_privs " + nnp + ", seccomp filters " + filters, nil
}

// broker is the process that keeps a command's shared connection.
type broker struct {
	spec    brokerSpec
	link    *remoteLink
	ready   chan struct{} // closed once the connection is open, or failed (status)
	status  brokerStatus
	mu      sync.Mutex
	clients int
	idle    *time.Timer
	parent  chan struct{} // closed once the command has ended
	done    chan struct{}
	ending  sync.Once
}

// ServeBroker is a broker (RemoteBrokerCommand): it reads its brokerSpec from in, listens, says
// so on out, opens the shared connection, and serves starts until the command has ended and no
// start uses it, or the connection ends.
func ServeBroker(in io.Reader, out io.WriteCloser) error {
	var spec brokerSpec
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&spec); err != nil {
		return fmt.Errorf("the broker's spec: %w", err)
	}
	if len(spec.Secret) != 32 || len(spec.Command) == 0 {
		return errors.New("the broker's spec lacks a secret or a command")
	}
	l, err := net.Listen("unix", socketName(spec.Secret))
	if err != nil {
		fmt.Fprintln(out, quoteText(err.Error()))
		out.Close()
		return err
	}
	defer l.Close()
	defer removeIfSame(spec.File, spec.Secret)
	fmt.Fprintln(out, "listening")
	out.Close()
	b := &broker{spec: spec, ready: make(chan struct{}), parent: make(chan struct{}), done: make(chan struct{})}
	b.idle = time.AfterFunc(brokerIdle, b.end)
	go b.watchParent()
	go b.open()
	go func() {
		<-b.done
		l.Close()
	}()
	var serving sync.WaitGroup
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		serving.Add(1)
		go func() { defer serving.Done(); b.serve(c) }()
	}
	<-b.ready
	serving.Wait()
	if b.link != nil {
		b.link.close()
	}
	return nil
}

// end ends the broker: no new start is served, and the connection is closed once ServeBroker
// returns.
func (b *broker) end() { b.ending.Do(func() { close(b.done) }) }

// watchParent closes parent once the command has ended, and ends the broker if no start uses it.
func (b *broker) watchParent() {
	defer func() {
		close(b.parent)
		b.mu.Lock()
		if b.clients == 0 {
			b.end()
		}
		b.mu.Unlock()
		// A start the command left behind (tofu killed outright) serves no one: the broker does
		// not wait for it past the grace.
		time.AfterFunc(brokerGrace, b.end)
	}()
	fd, err := unix.PidfdOpen(b.spec.Parent, 0)
	if err == unix.ESRCH {
		return
	}
	if err != nil { // a kernel without pidfd: look every second
		for procStarted(b.spec.Parent) == b.spec.Started {
			time.Sleep(time.Second)
		}
		return
	}
	defer unix.Close(fd)
	if procStarted(b.spec.Parent) != b.spec.Started {
		return // another process has its pid: the command has ended
	}
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[0].Revents != 0 {
			return
		}
	}
}

// open opens the shared connection: the command of the remote block, asking for a session.
func (b *broker) open() {
	defer func() {
		close(b.ready)
		if !b.status.OK {
			// A start that failed here would fail alike on a connection of its own: the ones
			// waiting hear why, and the next start of the command tries anew.
			removeIfSame(b.spec.File, b.spec.Secret)
			b.end()
		}
	}()
	opts := RemoteOptions{Name: b.spec.Name, Command: b.spec.Command, StartTimeout: b.spec.StartTimeout,
		HelloTimeout: b.spec.HelloTimeout, HelloSetting: b.spec.HelloSetting,
		Request: func(string) (*RemoteRequest, error) { return &RemoteRequest{Session: true}, nil }}
	opts = opts.withDefaults()
	l, stdout, err := launchLink(opts)
	if err != nil {
		b.status = brokerStatus{Error: err.Error()}
		return
	}
	in := bufio.NewReaderSize(stdout, 64<<10)
	if _, err := l.openBounded(context.Background(), in, opts); err != nil {
		l.abort()
		// ssh failing before the far side ran may be for want of a terminal, which the broker
		// (a session of its own) lacks: a key's passphrase or a host key question ssh asks on
		// /dev/tty. A start then connects on its own, where ssh can ask, as before sharing.
		var ssh *sshFailed
		b.status = brokerStatus{Error: l.explain(err).Error(), Fallback: errors.Is(err, errNoLaunches) || errors.As(err, &ssh)}
		return
	}
	if err := l.startSession(in); err != nil {
		l.abort()
		b.status = brokerStatus{Error: l.explain(err).Error()}
		return
	}
	b.link, b.status = l, brokerStatus{OK: true}
	go func() { // the connection ended: so does the broker, and with it every stream
		<-l.sess.CloseChan()
		b.end()
	}()
}

// serve serves one client: the proofs, the status, then its stream spliced to one of the
// connection's.
func (b *broker) serve(c net.Conn) {
	defer c.Close()
	// Who connected first: another user's or a provider's connections take no client's place.
	pid, err := peerIsUs(c)
	if err != nil || startOf(pid, b.spec.Parent, b.spec.Started) != "" {
		return
	}
	b.mu.Lock()
	if b.clients >= brokerClients {
		b.mu.Unlock()
		return
	}
	b.clients++
	b.idle.Stop()
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.clients--
		if b.clients == 0 {
			select {
			case <-b.parent:
				b.end()
			default:
				b.idle.Reset(brokerIdle)
			}
		}
		b.mu.Unlock()
	}()
	c.SetDeadline(time.Now().Add(brokerAuthTimeout))
	ns := make([]byte, 32)
	rand.Read(ns)
	if _, err := c.Write(ns); err != nil {
		return
	}
	got := make([]byte, 32+sha256.Size)
	if _, err := io.ReadFull(c, got); err != nil {
		return
	}
	nc := got[:32]
	if !hmac.Equal(got[32:], proof(b.spec.Secret, "client", ns, nc)) {
		return
	}
	if _, err := c.Write(proof(b.spec.Secret, "server", ns, nc)); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	<-b.ready
	if !b.status.OK {
		writeLine(c, b.status)
		return
	}
	s, err := b.link.sess.Open()
	if err != nil {
		writeLine(c, brokerStatus{Error: b.spec.Name + ": the shared connection ended"})
		return
	}
	defer s.Close()
	if err := writeLine(c, brokerStatus{OK: true}); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(s, c); done <- struct{}{} }()
	go func() { io.Copy(c, s); done <- struct{}{} }()
	select {
	case <-done:
	case <-b.done:
	}
}
