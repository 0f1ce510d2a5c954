package recording

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/oprov/oprov/pkg/plugin"
)

// Writer writes a recording. Lines go to a temporary file beside the destination, through a
// buffer (a recording is only ever read once Close has put it in place, so a line need not reach
// the file at once), and Close renames it into place: a recording is never seen half-written. A
// write that fails fails every call after it and Close, so the run fails and no file is left.
type Writer struct {
	mu   sync.Mutex
	f    *os.File
	buf  *bufio.Writer
	path string
	err  error
	// KeepConfig records the provider configuration's values (they are redacted otherwise).
	KeepConfig bool
	// KeepFunctionResults records what provider functions return (redacted otherwise: a result
	// may be a secret passed to the function, which oprov cannot see marked).
	KeepFunctionResults bool
	key                 *Key
	// lines are where each line went in the temporary file, and what orders it: Close writes them
	// in one order whatever the order their answers came in (tofu makes calls concurrently), so
	// the same run recorded twice gives the same lines.
	lines   []lineAt
	written int64
}

// lineAt is one written line: its place in the temporary file and its order key.
type lineAt struct {
	off   int64
	n     int
	order lineOrder
}

// lineOrder puts the header first, then each provider (by address) with its line before its
// calls, and its calls by call, type and request. Calls with the same key keep the order their
// answers came in (the sort is stable): replay answers such calls in that order.
type lineOrder struct {
	kind     int // 0 header, 1 provider, 2 call
	provider string
	call     string
	typ      string
	request  [32]byte
}

func (a lineOrder) less(b lineOrder) bool {
	switch {
	case a.kind == 0 || b.kind == 0:
		return a.kind < b.kind
	case a.provider != b.provider:
		return a.provider < b.provider
	case a.kind != b.kind:
		return a.kind < b.kind
	case a.call != b.call:
		return a.call < b.call
	case a.typ != b.typ:
		return a.typ < b.typ
	}
	return bytes.Compare(a.request[:], b.request[:]) < 0
}

func orderOf(l *Line) lineOrder {
	switch {
	case l.Format != 0:
		return lineOrder{kind: 0}
	case l.Call == "":
		return lineOrder{kind: 1, provider: l.Provider}
	}
	req, _ := json.Marshal(l.Request) // map keys sorted
	return lineOrder{kind: 2, provider: l.Provider, call: l.Call, typ: l.Type, request: sha256.Sum256(req)}
}

// writeBuffer is how many bytes of lines the writer holds before it writes them to the file.
const writeBuffer = 256 << 10

// Create starts a recording at path for a run of program (its name and version); key digests
// its redacted values (RecordKey).
func Create(path, program string, key *Key) (*Writer, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".oprov-recording-*")
	if err != nil {
		return nil, createError(path, dir, err)
	}
	w := &Writer{f: f, buf: bufio.NewWriterSize(f, writeBuffer), path: path, key: key}
	head := &Line{Format: formatVersion, Program: program, Created: time.Now().UTC().Format(time.RFC3339)}
	if key != nil {
		head.KeyID = key.ID()
	}
	if err := w.put(head); err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

func (w *Writer) put(l *Line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("recording %s: %w", w.path, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.buf.Write(append(b, '\n')); err != nil {
		w.err = fmt.Errorf("recording %s: %w", w.path, err)
		return w.err
	}
	w.lines = append(w.lines, lineAt{off: w.written, n: len(b) + 1, order: orderOf(l)})
	w.written += int64(len(b) + 1)
	return nil
}

// ordered writes the lines of the temporary file into a second one in their order, and gives
// its name ("" when they are in order already).
func (w *Writer) ordered() (string, error) {
	idx := make([]int, len(w.lines))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return w.lines[idx[i]].order.less(w.lines[idx[j]].order) })
	inOrder := true
	for i, k := range idx {
		if i != k {
			inOrder = false
			break
		}
	}
	if inOrder {
		return "", nil
	}
	out, err := os.CreateTemp(filepath.Dir(w.path), ".oprov-recording-*")
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(out, writeBuffer)
	var line []byte
	for _, k := range idx {
		l := w.lines[k]
		if cap(line) < l.n {
			line = make([]byte, l.n)
		}
		line = line[:l.n]
		if _, err = w.f.ReadAt(line, l.off); err != nil {
			break
		}
		if _, err = bw.Write(line); err != nil {
			break
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", err
	}
	return out.Name(), nil
}

// Close finishes the recording and puts it in place.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	if err == nil {
		err = w.buf.Flush()
	}
	name := w.f.Name()
	if err == nil {
		var sorted string
		if sorted, err = w.ordered(); err == nil && sorted != "" {
			os.Remove(name)
			name = sorted
		}
	}
	if err == nil && name == w.f.Name() {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, w.path)
	}
	if err != nil {
		os.Remove(w.f.Name())
		os.Remove(name)
		return fmt.Errorf("recording %s: %w", w.path, err)
	}
	return nil
}

// Abort drops the recording.
func (w *Writer) Abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

// schemaMethod is the method that gives a provider's schema in each protocol.
var schemaMethod = map[int]string{5: "/tfplugin5.Provider/GetSchema", 6: "/tfplugin6.Provider/GetProviderSchema"}

// Provider adds a running provider to the recording (its schema, read now) and gives the
// middleware that records its calls, around inner (nil when it has none).
func (w *Writer) Provider(ctx context.Context, pr *plugin.Provider, addr, version, h1 string, inner plugin.Middleware) (plugin.Middleware, error) {
	s, err := pr.Schema(ctx)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", addr, err)
	}
	wire, err := pr.Invoke(ctx, schemaMethod[pr.Protocol], nil)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %s: %w", addr, schemaMethod[pr.Protocol], err)
	}
	caps, err := serverCapabilities(pr.Protocol, wire)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", addr, err)
	}
	// Replay sends tofu the answer as it is: it must hold nothing the provider line does not show.
	if err := shownWire(pr.Protocol, wire, caps); err != nil {
		return nil, fmt.Errorf("recording %s: %w", addr, err)
	}
	sch, err := newSchemas(s)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", addr, err)
	}
	sch.keepConfig, sch.keepFunctionResults = w.KeepConfig, w.KeepFunctionResults
	sch.key = w.key
	if err := w.put(&Line{Provider: addr, Version: version, H1: h1, Protocol: pr.Protocol, Schema: s, SchemaWire: wire,
		ServerCapabilities: caps, ConfigKept: w.KeepConfig, FunctionResultsKept: w.KeepFunctionResults}); err != nil {
		return nil, err
	}
	return &recorder{w: w, addr: addr, schemas: sch, inner: inner}, nil
}

// recorder is the middleware that writes every unary call's request and response.
type recorder struct {
	w       *Writer
	addr    string
	schemas *schemas
	inner   plugin.Middleware
}

func (r *recorder) Unary(ctx context.Context, call *plugin.Call, next plugin.Next) ([]byte, error) {
	var resp []byte
	var err error
	if r.inner != nil {
		resp, err = r.inner.Unary(ctx, call, next)
	} else {
		resp, err = next(ctx, call.Request)
	}
	rpc := call.RPC()
	if rpc == "GetProviderSchema" || rpc == "GetSchema" {
		return resp, err // the provider line holds it
	}
	if werr := r.w.put(r.line(rpc, call.Request, resp, err)); werr != nil {
		return nil, status.Error(14, werr.Error()) // Unavailable: a call the recording misses would break replay
	}
	return resp, err
}

// line decodes a call for the recording, secrets redacted by pkg/protocol's classes. Nothing is
// kept that the model does not describe: a method it lacks is recorded by name only, a field it
// lacks by number only, and a message that does not decode as the model says is not kept at all.
func (r *recorder) line(rpc string, req, resp []byte, err error) *Line {
	l := &Line{Provider: r.addr, Call: rpc}
	spec, known := callSpecs()[rpc]
	var reqSpec, respSpec *message
	if known {
		reqSpec, respSpec = spec.request, spec.response
	}
	var derr error
	if l.Request, derr = decodeMsg(req, reqSpec, "", r.schemas, true); derr != nil {
		l.Request = Msg{unmodelledKey: true}
	}
	for _, k := range []string{"type_name", "name", "target_type_name", "action_type"} {
		if l.Type, _ = l.Request[k].(string); l.Type != "" {
			break
		}
	}
	if err != nil {
		st, _ := status.FromError(err)
		l.Error = &CallError{Code: st.Code().String(), Message: st.Message()}
		scrubAnswer(l)
		return l
	}
	if !known {
		l.Response = Msg{unmodelledKey: true}
	} else if l.Response, derr = decodeMsg(resp, respSpec, l.Type, r.schemas, true); derr != nil {
		l.Response = Msg{unmodelledKey: true}
	}
	scrubAnswer(l)
	return l
}

func (r *recorder) Done(method string, took time.Duration, err error) {
	if r.inner != nil {
		r.inner.Done(method, took, err)
	}
}

func (r *recorder) Own(method string, took time.Duration, err error) {
	if r.inner != nil {
		r.inner.Own(method, took, err)
	}
}

// Gate passes a stream's first message to the inner middleware's gate, if it has one.
func (r *recorder) Gate(ctx context.Context, call *plugin.Call) error {
	if g, ok := r.inner.(plugin.Gate); ok {
		return g.Gate(ctx, call)
	}
	return nil
}
