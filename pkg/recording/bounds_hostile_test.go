package recording

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/plugin"
)

// numberRecording is a recording of one apply whose number attribute holds num.
func numberRecording(t *testing.T, num string) string {
	apply := `{"provider":"example.com/x/x","call":"ApplyResourceChange","type":"x_thing","request":{"type_name":"x_thing"},"response":{"new_state":{"value":{"name":NUM}}}}`
	return header + "\n" + providerLineOf(t, "number") + "\n" + strings.Replace(apply, "NUM", num, 1) + "\n"
}

// A number's text is short, but its value is not: 1e600000000 is 600 million digits once cty
// writes it out in full (as msgpack does for a number no float64 holds), which keeps replay busy
// for hours. Read refuses the exponent, naming the line, before any number is built.
func TestReadRefusesHugeExponentBeforeBuildingTheNumber(t *testing.T) {
	for _, num := range []string{"1e600000000", "1E+600000000", "-1e-600000000", "0.5e1001", "1e99999999999999999999999999"} {
		_, err := Read(strings.NewReader(numberRecording(t, num)), "rec.jsonl", Limits{})
		if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "exponent") {
			t.Errorf("a number %s: %v, want a refusal of its exponent at line 3", num, err)
		}
	}
	for _, num := range []string{"1e308", "-2.5e-300", "123456789012345678901234567890.5", "1e1000"} {
		if _, err := Read(strings.NewReader(numberRecording(t, num)), "rec.jsonl", Limits{}); err != nil {
			t.Errorf("a number %s that a provider can give: %v", num, err)
		}
	}
}

// Digits are bounded as well as exponents: a number of 2000 digits is refused at the line.
func TestReadRefusesManyDigits(t *testing.T) {
	_, err := Read(strings.NewReader(numberRecording(t, "1"+strings.Repeat("0", 1999))), "rec.jsonl", Limits{})
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "digits") {
		t.Fatalf("a number of 2000 digits: %v", err)
	}
}

// A flat path of a million steps in "redacted" is 6 MB of JSON on one line; replay turned it
// into a million nested maps, recursively, and the goroutine's stack went past 1 GB. Read refuses
// a path longer than the bound, naming the line.
func TestReadRefusesAFlatPathOfAMillionSteps(t *testing.T) {
	path := "[" + strings.Repeat(`"a",`, 1_000_000) + `"a"]`
	line := `{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing","current_state":{"value":{"name":"x"},"redacted":[PATH]}},"response":{"new_state":{"value":{"name":"x"}}}}`
	rec, err := Read(strings.NewReader(header+"\n"+providerLine(t)+"\n"+strings.Replace(line, "PATH", path, 1)+"\n"), "rec.jsonl", Limits{})
	if err == nil {
		rec.Replayers(nil) // what crashed oprov
		t.Fatal("a path of a million steps was read")
	}
	if !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "path") {
		t.Fatalf("a path of a million steps: %v", err)
	}
}

// JSON nested deeper than the bound (here in a dynamic value's type, where any depth parses) is
// refused at the line, before a recursive walk meets it.
func TestReadRefusesDeepNesting(t *testing.T) {
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	line := `{"provider":"example.com/x/x","call":"ReadResource","type":"x_thing","request":{"type_name":"x_thing","current_state":{"value":{"name":DEEP}}},"response":{"new_state":{"value":{"name":"x"}}}}`
	_, err := Read(strings.NewReader(header+"\n"+providerLine(t)+"\n"+strings.Replace(line, "DEEP", deep, 1)+"\n"), "rec.jsonl", Limits{})
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("JSON nested 5000 deep: %v", err)
	}
}

// A call's name and type come from the recording; with escape sequences in them, the error that
// names them would drive the user's terminal. Read refuses names that are no RPC or type name,
// and the error quotes them.
func TestReadQuotesEscapeSequencesInNames(t *testing.T) {
	p := providerLine(t)
	for _, c := range []struct{ name, line string }{
		{"call", `{"provider":"example.com/x/x","call":"Read\u001b]0;pwned\u0007Resource","type":"x_thing","request":{},"response":{}}`},
		{"type", `{"provider":"example.com/x/x","call":"ReadResource","type":"x\u001b[2Jthing","request":{"type_name":"x"},"response":{"bogus":1}}`},
		{"provider", `{"provider":"example.com/x/x\u001b[31m","call":"ReadResource","type":"x_thing","request":{},"response":{}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(header+"\n"+p+"\n"+c.line+"\n"), "rec.jsonl", Limits{})
			if err == nil {
				t.Fatal("read")
			}
			if strings.ContainsAny(err.Error(), "\x1b\x07") || !strings.Contains(err.Error(), "line 3") {
				t.Fatalf("the error carries the escape sequence or names no line: %q", err)
			}
		})
	}
	// A provider line is held to the same: its address reaches stderr under -v.
	bad := strings.Replace(p, `"example.com/x/x"`, `"example.com/x/x\u001b[31m"`, 1)
	_, err := Read(strings.NewReader(header+"\n"+bad+"\n"), "rec.jsonl", Limits{})
	if err == nil || strings.ContainsAny(err.Error(), "\x1b") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a provider address with an escape sequence: %q", err)
	}
}

// The same value recorded twice gives the same bytes: the unknown and redacted places of an
// object's attributes came out in map order, so the same apply made a different file each time
// and "a changed answer shows up as a changed line" did not hold.
func TestFromCtyIsByteStable(t *testing.T) {
	attrs := map[string]cty.Type{}
	vals := map[string]cty.Value{}
	for i := range 40 {
		name := fmt.Sprintf("a%02d", i)
		attrs[name] = cty.String
		switch i % 3 {
		case 0:
			vals[name] = cty.UnknownVal(cty.String)
		case 1:
			vals[name] = cty.StringVal("secret")
		default:
			vals[name] = cty.StringVal("plain")
		}
	}
	attrs["list"] = cty.List(cty.Object(map[string]cty.Type{"x": cty.String, "y": cty.String}))
	vals["list"] = cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"x": cty.UnknownVal(cty.String), "y": cty.StringVal("s")})})
	ty := cty.Object(attrs)
	v := cty.ObjectVal(vals)
	sensitive := func(p Path) bool {
		if len(p) == 0 {
			return false
		}
		s, _ := p[len(p)-1].(string)
		return (s == "y" || strings.HasPrefix(s, "a") && vals[s].IsKnown() && vals[s].AsString() == "secret")
	}
	var first []byte
	for i := range 50 {
		rv, err := fromCty(v, ty, sensitive, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(rv)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
		} else if !bytes.Equal(b, first) {
			t.Fatalf("recorded twice, two different lines:\n%s\n%s", first, b)
		}
	}
	if !strings.Contains(string(first), `"unknown":[["a00"],["a03"],`) || !strings.Contains(string(first), `["list",0,"x"]]`) {
		t.Fatalf("the places are not in order: %s", first)
	}
}

// A recorded answer's texts reach the terminal: tofu prints a diagnostic's summary and detail
// and a call's error as they come. Replay gives them with control characters escaped (lines
// kept), so a recording cannot clear the screen or retitle the terminal; the recording itself is
// left as it is.
func TestReplayEscapesControlSequencesInRecordedTexts(t *testing.T) {
	p := providerLine(t)
	diag := `{"provider":"example.com/x/x","call":"ReadDataSource","type":"x_thing","request":{"type_name":"x_thing"},"response":{"diagnostics":[{"severity":2,"summary":"warn\u001b[2J\u001b]0;owned\u0007","detail":"line one\nline two\u009b31m"}]}}`
	fail := `{"provider":"example.com/x/x","call":"ValidateResourceConfig","type":"x_thing","request":{"type_name":"x_thing"},"error":{"code":"Unavailable","message":"gone\u001b[31m red"}}`
	rec, err := Read(strings.NewReader(header+"\n"+p+"\n"+diag+"\n"+fail+"\n"), "rec.jsonl", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rp := rec.Replayers(nil)[0]
	call := func(rpc string) ([]byte, error) {
		req := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "x_thing")
		return rp.Answer(t.Context(), &plugin.Call{Method: "/tfplugin6.Provider/" + rpc, Protocol: 6, Request: req})
	}
	resp, err := call("ReadDataSource")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(resp, "\x1b\x07") || bytes.Contains(resp, []byte("\u009b")) {
		t.Errorf("the replayed diagnostic carries control sequences: %q", resp)
	}
	if !bytes.Contains(resp, []byte(`warn\x1b[2J\x1b]0;owned\a`)) || !bytes.Contains(resp, []byte("line one\nline two")) {
		t.Errorf("the diagnostic's text is not kept, escaped: %q", resp)
	}
	_, err = call("ValidateResourceConfig")
	if err == nil || strings.ContainsRune(err.Error(), '\x1b') || !strings.Contains(err.Error(), `gone\x1b[31m red`) {
		t.Errorf("the replayed error: %q", err)
	}
	if m := rec.Providers["example.com/x/x"].Calls[0].Line.Response; !strings.Contains(fmt.Sprint(m), "\x1b") {
		t.Errorf("the recording as read was changed: %v", m)
	}
}

// A recording's size, its calls and one line are limits: over one, Read stops there, with an
// oci.LimitError naming the setting (the CLI names the variable that raises it) and the line.
func TestReadLimitsSizeCallsAndLine(t *testing.T) {
	p := providerLine(t)
	call := `{"provider":"example.com/x/x","call":"ReadDataSource","type":"x_thing","request":{"type_name":"x_thing"},"response":{}}`
	text := header + "\n" + p + "\n" + strings.Repeat(call+"\n", 10)
	for _, c := range []struct {
		name    string
		limits  Limits
		setting oci.Setting
		line    string
	}{
		{"size", Limits{MaxBytes: int64(len(text) - 1)}, SettingMaxRecordingBytes, "line 13"},
		{"calls", Limits{MaxCalls: 9}, SettingMaxRecordingCalls, "line 12"},
		{"line", Limits{MaxLine: len(p) - 1}, SettingMaxRecordingLine, "line 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(text), "rec.jsonl", c.limits)
			var le *oci.LimitError
			if !errors.As(err, &le) || le.Setting != c.setting || !strings.Contains(err.Error(), c.line) {
				t.Fatalf("over the %s: %v", c.setting, err)
			}
		})
	}
	exact := Limits{MaxBytes: int64(len(text)), MaxCalls: 10, MaxLine: len(p)}
	if _, err := Read(strings.NewReader(text), "rec.jsonl", exact); err != nil {
		t.Errorf("a recording at every limit: %v", err)
	}
	if d := defaultLimits(); d.MaxBytes != 1<<30 || d.MaxCalls != 1_000_000 || d.MaxLine != 256<<20 {
		t.Errorf("the defaults are not those docs/recording-format.md gives: %+v", d)
	}
}
