package recording

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	}
	return w.err
}

// Close finishes the recording and puts it in place.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	if err == nil {
		err = w.buf.Flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.f.Name(), w.path)
	}
	if err != nil {
		os.Remove(w.f.Name())
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
	spec, known := calls[rpc]
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
		return l
	}
	if !known {
		l.Response = Msg{unmodelledKey: true}
	} else if l.Response, derr = decodeMsg(resp, respSpec, l.Type, r.schemas, true); derr != nil {
		l.Response = Msg{unmodelledKey: true}
	}
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
