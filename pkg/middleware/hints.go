package middleware

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/sandbox/hint"
)

// WithHints wraps the middleware of a sandboxed provider (next; nil for none): to a response
// whose diagnostics report a permission error, it adds a warning that says which line of the
// sandbox block would allow what was refused (hint.Suggest), so that tofu shows it beside the
// error. Responses without such words pass as they are, undecoded. dir is the provider's working
// directory, against which a relative path it reports is read.
func WithHints(dir string) func(next plugin.Middleware) plugin.Middleware {
	return func(next plugin.Middleware) plugin.Middleware { return hints{next, dir} }
}

type hints struct {
	next plugin.Middleware
	dir  string
}

// refusalWords are what a response must contain for its diagnostics to be read at all.
var refusalWords = [][]byte{[]byte("ermission denied"), []byte("peration not permitted")}

func (h hints) Unary(ctx context.Context, call *plugin.Call, next plugin.Next) ([]byte, error) {
	var resp []byte
	var err error
	if h.next != nil {
		resp, err = h.next.Unary(ctx, call, next)
	} else {
		resp, err = next(ctx, call.Request)
	}
	info, known := rpcOf(call.RPC())
	if err != nil || !known || info.diagField == 0 || !(bytes.Contains(resp, refusalWords[0]) || bytes.Contains(resp, refusalWords[1])) {
		return resp, err
	}
	said := map[string]bool{}
	for _, d := range plugin.WireFields(resp, info.diagField) {
		text := string(plugin.WireField(d, diagSummary)) + "\n" + string(plugin.WireField(d, diagDetail))
		if s, ok := hint.SuggestIn(text, h.dir); ok && !said[s] && !strings.HasPrefix(text, "oprov: ") {
			said[s] = true
			// Each warning's summary names what was refused: tofu folds warnings of one summary
			// into "and N more similar warnings", which would hide every hint but the first.
			what, _, _ := strings.Cut(s, ":")
			resp = appendDiagnostic(resp, info.diagField, severityWarning, "oprov: the provider's sandbox may have refused this: "+what, s+".")
		}
	}
	return resp, nil
}

func (h hints) Done(method string, took time.Duration, err error) {
	if h.next != nil {
		h.next.Done(method, took, err)
	}
}

func (h hints) Own(method string, took time.Duration, err error) {
	if h.next != nil {
		h.next.Own(method, took, err)
	}
}

// Gate passes the wrapped middleware's judgement of streams on.
func (h hints) Gate(ctx context.Context, call *plugin.Call) error {
	if g, ok := h.next.(plugin.Gate); ok {
		return g.Gate(ctx, call)
	}
	return nil
}
