package recording

import (
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// A provider may echo a secret it was sent in what it answers with: a diagnostic ("the password
// hunter2 is too short"), a function's error, a call's error. Those texts are public in a
// recording, so the secrets the call's request held are taken out of them first.

// appendTexts adds the texts of v's known string leaves (and of numbers of four digits or more)
// to out.
func appendTexts(out []string, v cty.Value) []string {
	if !v.IsKnown() || v.IsNull() {
		return out
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		if s := v.AsString(); s != "" {
			out = append(out, s)
		}
	case ty == cty.Number:
		if s := v.AsBigFloat().Text('f', -1); len(s) >= 4 {
			out = append(out, s)
		}
	case ty.IsObjectType() || ty.IsMapType() || ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = appendTexts(out, e)
		}
	}
	return out
}

// msgTexts gathers the redacted texts of every value in a decoded message.
func msgTexts(v any, out []string) []string {
	switch v := v.(type) {
	case *Value:
		return append(out, v.texts...)
	case *RawState:
		return append(out, v.texts...)
	case Msg:
		for _, e := range v {
			out = msgTexts(e, out)
		}
	case []any:
		for _, e := range v {
			out = msgTexts(e, out)
		}
	}
	return out
}

// scrubTexts replaces each secret text in s with the redaction marker, longest first.
func scrubTexts(s string, secrets []string) string {
	for _, t := range secrets {
		s = strings.ReplaceAll(s, t, redactedText)
	}
	return s
}

// scrubAnswer takes the request's secrets out of a recorded line's diagnostics, function error
// and call error.
func scrubAnswer(l *Line) {
	secrets := msgTexts(l.Request, nil)
	if len(secrets) == 0 {
		return
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	if l.Error != nil {
		l.Error.Message = scrubTexts(l.Error.Message, secrets)
	}
	scrubMsg(l.Response, secrets)
}

// scrubMsg scrubs the texts of diagnostics and function errors anywhere in m.
func scrubMsg(m Msg, secrets []string) {
	for k, v := range m {
		switch v := v.(type) {
		case string:
			if k == "summary" || k == "detail" || k == "text" {
				m[k] = scrubTexts(v, secrets)
			}
		case Msg:
			scrubMsg(v, secrets)
		case []any:
			for _, e := range v {
				if sub, ok := e.(Msg); ok {
					scrubMsg(sub, secrets)
				}
			}
		}
	}
}

// jsonTexts adds the string leaves of a stored state's JSON.
func jsonTexts(j any, out []string) []string {
	switch j := j.(type) {
	case string:
		if j != "" {
			out = append(out, j)
		}
	case map[string]any:
		for _, e := range j {
			out = jsonTexts(e, out)
		}
	case []any:
		for _, e := range j {
			out = jsonTexts(e, out)
		}
	}
	return out
}
