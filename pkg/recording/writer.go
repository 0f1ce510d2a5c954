package recording

import (
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

// Writer writes a recording. Lines go to a temporary file beside the destination, one write a
// line, and Close renames it into place: a recording is never seen half-written.
type Writer struct {
	mu   sync.Mutex
	f    *os.File
	path string
	err  error
	// KeepConfig records the provider configuration's values (they are redacted otherwise).
	KeepConfig bool
	key        *Key
}

// Create starts a recording at path for a run of program (its name and version); key digests
// its redacted values (RecordKey).
func Create(path, program string, key *Key) (*Writer, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".oprov-recording-*")
	if err != nil {
		return nil, createError(path, dir, err)
	}
	w := &Writer{f: f, path: path, key: key}
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
	if _, err := w.f.Write(append(b, '\n')); err != nil {
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
	sch, err := newSchemas(s)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", addr, err)
	}
	sch.keepConfig = w.KeepConfig
	sch.key = w.key
	if err := w.put(&Line{Provider: addr, Version: version, H1: h1, Protocol: pr.Protocol, Schema: s, SchemaWire: wire, ConfigKept: w.KeepConfig}); err != nil {
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

// line decodes a call for the recording, secrets redacted. What does not decode is kept as it
// came.
func (r *recorder) line(rpc string, req, resp []byte, err error) *Line {
	l := &Line{Provider: r.addr, Call: rpc}
	spec, known := calls[rpc]
	var reqSpec, respSpec *message
	if known {
		reqSpec, respSpec = spec.request, spec.response
	}
	var derr error
	if l.Request, derr = decodeMsg(req, reqSpec, "", r.schemas, true); derr != nil {
		l.Request = Msg{"wire": req}
	}
	l.Type, _ = l.Request["type_name"].(string)
	if l.Type == "" {
		l.Type, _ = l.Request["name"].(string)
	}
	if err != nil {
		st, _ := status.FromError(err)
		l.Error = &CallError{Code: st.Code().String(), Message: st.Message()}
		return l
	}
	if l.Response, derr = decodeMsg(resp, respSpec, l.Type, r.schemas, true); derr != nil {
		l.Response = Msg{"wire": resp}
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
