package stdiohost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// maxLine bounds one message from the program.
const maxLine = 64 << 20

// process is the provider program and the JSON-RPC client over its stdin and stdout.
type process struct {
	name       string // for messages: `stdio provider "TYPE"`
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	timeout    time.Duration
	concurrent bool
	serial     sync.Mutex // held for a whole call unless concurrent
	writeMu    sync.Mutex
	stderr     *tailLines
	exited     chan struct{}

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan reply
	dead    error // why the program can no longer answer; set once
}

type reply struct {
	result json.RawMessage
	err    error
}

// message is any JSON-RPC 2.0 message the program may write.
type message struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id"`
	Method  string           `json:"method"`
	Result  json.RawMessage  `json:"result"`
	Error   *rpcError        `json:"error"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// callError is an error answer from the program.
type callError struct {
	Method   string
	Code     int
	Message  string
	Detail   string
	Path     []any
	Severity string
	Argument *int
}

func (e *callError) Error() string {
	s := e.Message
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// dirVariable is the environment variable that tells a stdio provider its own directory: it runs
// in tofu's working directory (where the configuration's relative paths point), as any provider.
const dirVariable = "OPROV_PROVIDER_DIR"

// startProcess runs the manifest's command, found in dir, in workDir ("": the host's own, tofu's),
// with dirVariable naming dir. Its stderr goes to logw line by line.
func startProcess(dir, workDir string, m *Manifest, logw io.Writer) (*process, error) {
	timeout, err := m.timeout()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(inDir(dir, m.Command[0], true), commandArgs(dir, m.Command[1:])...)
	cmd.Env = append(os.Environ(), dirVariable+"="+dir)
	cmd.Dir = workDir
	setDeathSignal(cmd)
	p := &process{name: fmt.Sprintf("stdio provider %q (%s)", m.Type, strings.Join(m.Command, " ")), cmd: cmd,
		timeout: timeout, stderr: &tailLines{max: 20}, exited: make(chan struct{}), pending: map[int64]chan reply{}}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s in %s: %w (is %s installed and on PATH?)", p.name, dir, err, m.Command[0])
	}
	stderrDone := make(chan struct{})
	go func() { p.copyStderr(stderr, logw); close(stderrDone) }()
	go p.readLoop(stdout, stderrDone)
	return p, nil
}

// inDir gives a command word as found in the provider's directory: the program given as a
// relative path (./provider), or an argument that names a file there (provider.py), is made
// absolute; anything else (python3 looked up on PATH, an absolute path, a flag) is left as written.
func inDir(dir, word string, prog bool) string {
	if word == "" || filepath.IsAbs(word) || strings.HasPrefix(word, "-") {
		return word
	}
	p := filepath.Join(dir, word)
	if prog && strings.ContainsRune(word, '/') || !prog && fileExists(p) {
		return p
	}
	return word
}

// commandArgs gives the command's arguments as found in the provider's directory (inDir).
func commandArgs(dir string, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = inDir(dir, a, false)
	}
	return out
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (p *process) copyStderr(r io.Reader, logw io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		p.stderr.add(sc.Text())
		if logw != nil {
			fmt.Fprintf(logw, "%s\n", sc.Text())
		}
	}
}

// readLoop reads the program's answers until its stdout ends, then records why.
func (p *process) readLoop(stdout io.Reader, stderrDone chan struct{}) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(br)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.fail(fmt.Errorf("%s wrote %v on stdout; stopped it", p.name, err))
				p.kill()
			}
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := p.deliver(line); err != nil {
			p.fail(err)
			p.kill()
			break
		}
	}
	select {
	case <-stderrDone:
	case <-time.After(2 * time.Second):
	}
	werr := p.cmd.Wait()
	status := "exited with status 0"
	if werr != nil {
		status = werr.Error()
	}
	p.fail(fmt.Errorf("%s %s%s", p.name, status, p.stderr.describe()))
	close(p.exited)
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// deliver hands one line to the call waiting for it; a line that is not JSON-RPC is an error.
func (p *process) deliver(line []byte) error {
	var msg message
	if err := json.Unmarshal(line, &msg); err != nil || msg.JSONRPC != "2.0" {
		return fmt.Errorf("%s wrote something that is not a JSON-RPC 2.0 message on stdout: %q; "+
			"a provider writes only protocol messages on stdout, one per line, and its logs on stderr; stopped it", p.name, clip(line, 200))
	}
	if err := checkWire(line); err != nil {
		return fmt.Errorf("%s wrote a message the protocol does not allow on stdout: %v; stopped it", p.name, err)
	}
	if msg.ID == nil {
		return nil // a notification: ignored
	}
	var id int64
	if err := json.Unmarshal(*msg.ID, &id); err != nil {
		return fmt.Errorf("%s answered with id %s, which oprov never sent; stopped it", p.name, clip(*msg.ID, 40))
	}
	p.mu.Lock()
	ch := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if ch == nil {
		return nil // the answer to a call that timed out
	}
	if msg.Error != nil {
		ch <- reply{err: msg.Error.toCallError()}
	} else {
		ch <- reply{result: msg.Result}
	}
	return nil
}

func (e *rpcError) toCallError() *callError {
	ce := &callError{Code: e.Code, Message: e.Message}
	if ce.Message == "" {
		ce.Message = fmt.Sprintf("error %d", e.Code)
	}
	var data struct {
		Detail   string `json:"detail"`
		Path     []any  `json:"path"`
		Severity string `json:"severity"`
		Argument *int   `json:"argument"`
	}
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &data) == nil {
		ce.Detail, ce.Path, ce.Severity, ce.Argument = data.Detail, data.Path, data.Severity, data.Argument
	} else if len(e.Data) > 0 {
		ce.Detail = string(e.Data)
	}
	return ce
}

func (p *process) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead != nil {
		return
	}
	p.dead = err
	for id, ch := range p.pending {
		ch <- reply{err: err}
		delete(p.pending, id)
	}
}

func (p *process) kill() { killGroup(p.cmd) }

// call sends one request and waits for its answer, at most the timeout. A program that does
// not answer in time is stopped: it can no longer be trusted to answer in order.
func (p *process) call(ctx context.Context, method string, params any, out any) error {
	if !p.concurrent {
		p.serial.Lock()
		defer p.serial.Unlock()
	}
	p.mu.Lock()
	if p.dead != nil {
		p.mu.Unlock()
		return fmt.Errorf("cannot send %s: %w", method, p.dead)
	}
	p.nextID++
	id := p.nextID
	ch := make(chan reply, 1)
	p.pending[id] = ch
	p.mu.Unlock()
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	p.writeMu.Lock()
	_, err = p.stdin.Write(append(req, '\n'))
	p.writeMu.Unlock()
	if err != nil {
		p.fail(fmt.Errorf("%s stopped reading its stdin: %v", p.name, err))
	}
	timer := time.NewTimer(p.timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			var ce *callError
			if errors.As(r.err, &ce) {
				ce.Method = method
				return ce
			}
			return fmt.Errorf("during %s: %w", method, r.err)
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(r.result, out); err != nil {
			return fmt.Errorf("%s answered %s with a result of the wrong shape: %v", p.name, method, err)
		}
		return nil
	case <-timer.C:
		err := fmt.Errorf("%s did not answer %s within %s; stopped it (raise timeout_seconds in %s, or set OPROV_STDIO_TIMEOUT)", p.name, method, p.timeout, ManifestName)
		p.fail(err)
		p.kill()
		return err
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return fmt.Errorf("%s: %s: %w", p.name, method, ctx.Err())
	}
}

// close ends the program: stdin closed, then a kill if it has not exited within grace.
func (p *process) close(grace time.Duration) {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
		<-p.exited
	}
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// tailLines keeps the last lines of the program's stderr for error messages.
type tailLines struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *tailLines) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, s)
	if len(t.lines) > t.max {
		t.lines = t.lines[1:]
	}
}

func (t *tailLines) describe() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return " (nothing on stderr)"
	}
	return "; its last lines on stderr:\n  " + strings.Join(t.lines, "\n  ")
}
