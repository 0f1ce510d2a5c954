package recording

import (
	"encoding/json"
	"sort"
)

// The index answers the common case, a call the recording holds exactly, without comparing it
// with every recorded call: each recorded call has a key (its compared fields, marked, with the
// ignored attributes left out), and a live call's key is made the same way: its secrets redacted
// by the same schema, each marked with its digest (digest.go), so a secret matches only the same
// secret.

type indexEntry struct {
	sig   string // the redacted places, by field
	paths map[string][]Path
	calls map[string][]*CallRec // by key
}

// canon writes a marked tree with marks that no JSON value can spell.
func canon(v any) any {
	switch v := v.(type) {
	case mark:
		return map[string]any{"\x00": string(v)}
	case absent:
		return map[string]any{"\x00": "absent"}
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = canon(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = canon(e)
		}
		return l
	}
	return v
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
				trees = append(trees, canon(t))
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

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func keyOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sigOf(p map[string][]Path) string {
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	sort.Strings(names)
	b, _ := json.Marshal(p)
	return string(b)
}

// indexCalls builds the index of a replayer's recorded calls.
func (rp *Replayer) indexCalls() {
	rp.index = map[string][]*indexEntry{}
	for k, cs := range rp.byKey {
		for _, c := range cs {
			spec := requestSpec(c.Line.Call)
			norm, err := normal(c.Line.Request)
			if err != nil {
				continue
			}
			trees, own := rp.fieldTrees(spec, c.Line.Type, norm, nil)
			sig := sigOf(own)
			var e *indexEntry
			for _, x := range rp.index[k] {
				if x.sig == sig {
					e = x
				}
			}
			if e == nil {
				e = &indexEntry{sig: sig, paths: own, calls: map[string][]*CallRec{}}
				rp.index[k] = append(rp.index[k], e)
			}
			key := keyOf(trees)
			e.calls[key] = append(e.calls[key], c)
		}
	}
}

// lookup gives the recorded calls the same as a live one, in recorded order.
func (rp *Replayer) lookup(rpc, typ string, live Msg) []*CallRec {
	spec := requestSpec(rpc)
	var out []*CallRec
	for _, e := range rp.index[rpc+"\x00"+typ] {
		trees, _ := rp.fieldTrees(spec, typ, live, nil) // the live call has its own secrets' digests
		out = append(out, e.calls[keyOf(trees)]...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LineNo < out[j].LineNo })
	return out
}

func requestSpec(rpc string) *message {
	if c, ok := calls[rpc]; ok {
		return c.request
	}
	return nil
}

// finalKeys indexes the objects a recording shows existing, by type, as lookup does calls.
type finalIndex struct {
	paths []Path
	keys  map[string][]any // the configurations each was applied with
}

func (rp *Replayer) indexFinals() {
	rp.finalIdx = map[string][]*finalIndex{}
	for typ, states := range rp.finals {
		for i, s := range states {
			var j any
			if err := decodeJSON([]byte(keyOf(s)), &j); err != nil {
				continue
			}
			m, _ := j.(map[string]any)
			own, _ := asPaths(m["redacted"])
			sig := sigOf(map[string][]Path{"": own})
			var fi *finalIndex
			for _, x := range rp.finalIdx[typ] {
				if sigOf(map[string][]Path{"": x.paths}) == sig {
					fi = x
				}
			}
			if fi == nil {
				fi = &finalIndex{paths: own, keys: map[string][]any{}}
				rp.finalIdx[typ] = append(rp.finalIdx[typ], fi)
			}
			k := rp.stateKey(typ, j, nil)
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
	return keyOf(canon(t))
}
