package middleware

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Rules read values unredacted, so an evaluation error can quote a secret (CEL's "invalid RFC
// 3339 timestamp \"...\"", Go's "cannot parse \"...\""). Before such a text reaches the audit or
// a diagnostic, every secret value of the change in it becomes the redaction marker.

// secretsOf gives the string forms of the secret leaves of a value: clear is the value as rules
// see it, red the same value as the audit has it (goValue with redact); where red holds a
// redaction marker, clear holds a secret.
func secretsOf(clear, red any, out map[string]bool) {
	switch r := red.(type) {
	case string:
		if r == redacted || r == wholeSecret {
			allForms(clear, out)
		}
	case map[string]any:
		c, _ := clear.(map[string]any)
		for k, rv := range r {
			secretsOf(c[k], rv, out)
		}
	case []any:
		c, _ := clear.([]any)
		for i, rv := range r {
			if i < len(c) {
				secretsOf(c[i], rv, out)
			}
		}
	}
}

// allForms adds a wholly secret value: its own forms and those of every value within it.
func allForms(v any, out map[string]bool) {
	add := func(s string) {
		if s != "" {
			out[s] = true
		}
	}
	switch v := v.(type) {
	case nil:
		return
	case string:
		add(v)
		add(strconv.Quote(v))
	case map[string]any:
		for _, e := range v {
			allForms(e, out)
		}
	case []any:
		for _, e := range v {
			allForms(e, out)
		}
	}
	add(fmt.Sprint(v))
	if js, err := json.Marshal(v); err == nil {
		add(string(js))
	}
}

// quoted finds the double-quoted strings of an error text (Go and CEL quote values so).
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// scrub replaces every secret in an error text with the redaction marker, longest first, and
// any quoted string that is part of a secret (a parser quotes what it could not read, a tail of
// the value).
func scrub(text string, secrets []string) string {
	if len(secrets) == 0 {
		return text
	}
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, redacted)
	}
	return quoted.ReplaceAllStringFunc(text, func(q string) string {
		u, err := strconv.Unquote(q)
		if err != nil || u == "" || u == redacted {
			return q
		}
		for _, s := range secrets {
			if strings.Contains(s, u) {
				return strconv.Quote(redacted)
			}
		}
		return q
	})
}

// secretList orders the forms longest first, so a secret that holds another is replaced whole.
func secretList(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}
