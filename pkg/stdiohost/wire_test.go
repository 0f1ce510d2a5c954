package stdiohost

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
)

// wireProvider answers read with the state line the test put in answer.json, as bytes.
const wireProvider = `import json, os, sys
A = {"id": {"type": "string", "required": True}, "n": {"type": "number", "optional": True}, "s": {"type": "string", "optional": True}}
for line in sys.stdin:
    r = json.loads(line)
    if r["method"] == "read":
        sys.stdout.buffer.write(open(os.path.join(os.environ["OPROV_PROVIDER_DIR"], "answer.json"), "rb").read().replace(b"ID", str(r["id"]).encode()) + b"\n")
        sys.stdout.flush()
        continue
    res = {}
    if r["method"] == "initialize":
        res = {"protocol_version": "1", "capabilities": {}, "schema": {"resources": {"w_x": {"attributes": A}}}}
    print(json.dumps({"jsonrpc": "2.0", "id": r["id"], "result": res}), flush=True)
`

// A program's answer with a huge number, a number beyond every bound, or bytes that are not
// UTF-8 is refused as a protocol error, at once (within the call's timeout), naming the cause.
func TestWireRefusesWhatNoValueNeeds(t *testing.T) {
	huge := strings.Repeat("7", 2_000_000)
	for name, tc := range map[string]struct{ answer, want string }{
		"2 million digits":   {`{"jsonrpc":"2.0","id":ID,"result":{"state":{"id":"a","n":` + huge + `}}}`, "a number of 2000000 digits"},
		"1e999999999":        {`{"jsonrpc":"2.0","id":ID,"result":{"state":{"id":"a","n":1e999999999}}}`, "exponents of at most"},
		"invalid UTF-8":      {"{\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"state\":{\"id\":\"a\",\"s\":\"caf\xe9\"}}}", "not UTF-8"},
		"lone surrogate":     {`{"jsonrpc":"2.0","id":ID,"result":{"state":{"id":"a","s":"\udc00"}}}`, "lone UTF-16 surrogate"},
		"huge number string": {`{"jsonrpc":"2.0","id":ID,"result":{"state":{"id":"a","n":"` + huge + `"}}}`, "want a number"},
		"Inf as a string":    {`{"jsonrpc":"2.0","id":ID,"result":{"state":{"id":"a","n":"1e999999999"}}}`, "want a number"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "p.py"), []byte(wireProvider), 0o644)
			os.WriteFile(filepath.Join(dir, "answer.json"), []byte(tc.answer), 0o644)
			os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"type": "w", "command": ["python3", "p.py"], "timeout_seconds": 2}`), 0o644)
			h, err := newHost(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			ctx := context.Background()
			s, err := h.ready(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cur, _ := encodeDV(cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("a"), "n": cty.NullVal(cty.Number), "s": cty.NullVal(cty.String)}), s.resources["w_x"].ty)
			start := time.Now()
			resp, _ := h.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: "w_x", CurrentState: cur})
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the read took %s, over the 2 s timeout", took)
			}
			if len(resp.Diagnostics) == 0 {
				t.Fatal("the answer was accepted")
			}
			if d := resp.Diagnostics[0]; !strings.Contains(d.Summary+" "+d.Detail, tc.want) {
				t.Errorf("the refusal does not say %q: %s: %s", tc.want, d.Summary, clip([]byte(d.Detail), 300))
			}
		})
	}
}

// Numbers within the bounds, however long, are read exactly.
func TestWireKeepsNumbersWithinTheBounds(t *testing.T) {
	long := "0." + strings.Repeat("1", maxNumberDigits-1)
	for _, in := range []string{long, "-" + long + "e-9999", "4.9406564584124654e-324", "1.7976931348623157e308", "1e9999"} {
		if err := checkWire([]byte(`{"n":` + in + `}`)); err != nil {
			t.Errorf("%.40s: %v", in, err)
		}
		if _, err := parseNumber(in); err != nil {
			t.Errorf("%.40s: %v", in, err)
		}
	}
	for _, in := range []string{"1" + strings.Repeat("0", maxNumberDigits), "1e10000", "1e-10000"} {
		if err := checkWire([]byte(`[` + in + `]`)); err == nil {
			t.Errorf("%.40s passed", in)
		}
	}
	many := "[" + strings.Repeat("1,", maxNumberWork) + "1]"
	if err := checkWire([]byte(many)); err == nil || !strings.Contains(err.Error(), "more numbers than one message may carry") {
		t.Errorf("%d numbers in one message: %v", maxNumberWork+1, err)
	}
	if err := checkWire([]byte(`{"s":"\ud83d\ude00 and \\ud800 escaped"}`)); err != nil {
		t.Errorf("a surrogate pair, and an escaped backslash: %v", err)
	}
}

// Strings a provider sends where a number is wanted are parsed as numbers (as tofu converts), so
// they count against the same budget and bounds: 10,000 strings of a thousand digits with an
// exponent of -9999 are refused by the wire check as the same numbers are, and a string with an
// exponent over the bound is not parsed.
func TestWireCountsStringsThatReadAsNumbers(t *testing.T) {
	n := `"9.` + strings.Repeat("9", maxNumberDigits-2) + `e-9999"`
	many := "[" + strings.Repeat(n+",", 10_000) + n + "]"
	if err := checkWire([]byte(many)); err == nil || !strings.Contains(err.Error(), "strings that read as numbers count") {
		t.Errorf("10,001 number strings of %d bytes: %v", len(n), err)
	}
	words := "[" + strings.Repeat(`"`+strings.Repeat("x", 990)+`",`, 10_000) + `"x"]`
	if err := checkWire([]byte(words)); err != nil {
		t.Errorf("strings that are not numbers were charged: %v", err)
	}
	if _, err := parseNumber("1e99999"); err == nil || !strings.Contains(err.Error(), "exponents of at most") {
		t.Errorf("a string 1e99999 read as a number: %v", err)
	}
}
