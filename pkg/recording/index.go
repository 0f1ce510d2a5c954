package recording

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"sort"
	"strconv"
	"sync"
)

// The index answers the common case, a call the recording holds exactly, without comparing it
// with every recorded call: each recorded call has a key (a digest of its compared fields,
// marked, with the ignored attributes left out), and a live call's key is made the same way: its
// secrets redacted by the same schema, each marked with its digest (digest.go), so a secret
// matches only the same secret. Building is linear in the calls; a lookup costs the size of the
// call, whatever the recording's length.

// indexEntry is the recorded calls of one key, in recorded order; next is the first of them
// not yet answered (answered calls only grow, so it only moves forward).
type indexEntry struct {
	calls []*CallRec
	next  int
}

// callIndex is the recorded calls of one kind (call and type), by key.
type callIndex struct {
	calls map[string]*indexEntry
}

// digest writes a marked tree canonically (map keys sorted; the marks as tokens no JSON value
// spells) into a SHA-256 and gives the sum: two trees have the same key exactly when they are
// the same. Walks are as deep as the tree, which Read bounds (maxDepth and maxPathSteps).
func digest(v any) string {
	h := sha256.New()
	w := writers.Get().(*bufio.Writer)
	w.Reset(h)
	writeCanon(w, v)
	w.Flush()
	w.Reset(nil)
	writers.Put(w)
	return string(h.Sum(nil))
}

var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}

func writeCanon(w *bufio.Writer, v any) {
	switch v := v.(type) {
	case mark:
		w.WriteString("!mark")
		w.WriteString(strconv.Quote(string(v)))
	case absent:
		w.WriteString("!absent")
	case nil:
		w.WriteString("null")
	case bool:
		w.WriteString(strconv.FormatBool(v))
	case string:
		w.WriteString(strconv.Quote(v))
	case json.Number:
		w.WriteString("#" + string(v))
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		w.WriteByte('{')
		for _, k := range keys {
			w.WriteString(strconv.Quote(k))
			w.WriteByte(':')
			writeCanon(w, v[k])
			w.WriteByte(',')
		}
		w.WriteByte('}')
	case Msg:
		writeCanon(w, map[string]any(v))
	case []any:
		w.WriteByte('[')
		for _, e := range v {
			writeCanon(w, e)
			w.WriteByte(',')
		}
		w.WriteByte(']')
	default:
		// Anything else (bytes, a number of another type) as JSON, marked as such.
		b, _ := json.Marshal(v)
		w.WriteString("?")
		w.Write(b)
	}
}

func deleteAt(tree any, p Path) {
	if len(p) == 0 {
		return
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return
	}
	k, _ := p[0].(string)
	if len(p) == 1 {
		delete(m, k)
		return
	}
	deleteAt(m[k], p[1:])
}

// fieldTrees gives a request's compared fields as marked trees, with redacted (when given) put
// in and ignored attributes left out; and the redacted places it holds itself.
func (rp *Replayer) fieldTrees(spec *message, typ string, req Msg, redacted map[string][]Path) (map[string]any, map[string][]Path) {
	out := map[string]any{}
	own := map[string][]Path{}
	if spec == nil || req[unmodelledKey] != nil {
		out[unmodelledKey] = req[unmodelledKey]
		return out, own
	}
	for _, f := range spec.fields {
		if !f.compared {
			continue
		}
		v := req[f.name]
		switch f.kind {
		case kValue, kRawState:
			vals, single := []any{v}, !f.repeated
			if f.repeated {
				vals, _ = v.([]any)
			}
			var trees []any
			for i, e := range vals {
				name := f.name
				if !single {
					name = f.name + "[" + itoa(i) + "]"
				}
				if m, ok := e.(map[string]any); ok {
					if ps, _ := asPaths(m["redacted"]); len(ps) > 0 {
						own[name] = ps
					}
				}
				t := marked(e)
				for _, p := range redacted[name] {
					t = setAt(t, p, redactedMark)
				}
				for _, ig := range rp.ignoresOf(typ) {
					deleteAt(t, ig.Path)
				}
				trees = append(trees, t)
			}
			if single {
				out[f.name] = trees[0]
			} else {
				out[f.name] = trees
			}
		default:
			out[f.name] = v
		}
	}
	return out, own
}

func itoa(i int) string { return strconv.Itoa(i) }

func sigOf(p map[string][]Path) string {
	b, _ := json.Marshal(p) // map keys sorted
	return string(b)
}

// indexCalls builds the index of a replayer's recorded calls.
func (rp *Replayer) indexCalls() {
	rp.index = map[string]*callIndex{}
	for k, cs := range rp.byKey {
		ci := &callIndex{calls: map[string]*indexEntry{}}
		rp.index[k] = ci
		for _, c := range cs {
			// A recorded request is JSON as read: already what a live one is made into.
			trees, _ := rp.fieldTrees(requestSpec(c.Line.Call), c.Line.Type, c.Line.Request, nil)
			key := digest(trees)
			e := ci.calls[key]
			if e == nil {
				e = &indexEntry{}
				ci.calls[key] = e
			}
			e.calls = append(e.calls, c)
		}
	}
}

// lookup gives recorded calls the same as a live one, in recorded order: the first of them and
// the first not yet answered (what Answer chooses from). It is called with rp.mu held.
func (rp *Replayer) lookup(rpc, typ string, live Msg) []*CallRec {
	ci := rp.index[rpc+"\x00"+typ]
	if ci == nil {
		return nil
	}
	trees, _ := rp.fieldTrees(requestSpec(rpc), typ, live, nil) // the live call has its own secrets' digests
	e := ci.calls[digest(trees)]
	if e == nil {
		return nil
	}
	for e.next < len(e.calls) && rp.used[e.calls[e.next]] {
		e.next++
	}
	out := []*CallRec{e.calls[0]}
	if e.next > 0 && e.next < len(e.calls) {
		out = append(out, e.calls[e.next])
	}
	return out
}

func requestSpec(rpc string) *message {
	if c, ok := callSpecs()[rpc]; ok {
		return c.request
	}
	return nil
}

// finalIndex indexes the objects a recording shows existing, of one type and one set of
// redacted places, as lookup does calls: by key, the configurations each was applied with.
type finalIndex struct {
	paths  []Path
	keys   map[string][]any
	legacy bool // the provider planned the type with the legacy type system (SDKv2)
}

func (rp *Replayer) indexFinals() {
	rp.finalIdx = map[string][]*finalIndex{}
	for typ, states := range rp.finals {
		legacy := false
		for _, c := range rp.byKey["PlanResourceChange\x00"+typ] {
			if b, ok := c.Line.Response["legacy_type_system"].(bool); ok && b {
				legacy = true
			}
		}
		bySig := map[string]*finalIndex{}
		for i, s := range states {
			m, _ := s.(map[string]any) // JSON as read
			own, _ := asPaths(m["redacted"])
			sig := sigOf(map[string][]Path{"": own})
			fi := bySig[sig]
			if fi == nil {
				fi = &finalIndex{paths: own, keys: map[string][]any{}, legacy: legacy}
				bySig[sig] = fi
				rp.finalIdx[typ] = append(rp.finalIdx[typ], fi)
			}
			k := rp.stateKey(typ, s, nil)
			fi.keys[k] = append(fi.keys[k], rp.configs[typ][i])
		}
	}
}

func (rp *Replayer) stateKey(typ string, state any, redacted []Path) string {
	t := marked(state)
	for _, p := range redacted {
		t = setAt(t, p, redactedMark)
	}
	for _, ig := range rp.ignoresOf(typ) {
		deleteAt(t, ig.Path)
	}
	return digest(t)
}
