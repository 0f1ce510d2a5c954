package middleware

import (
	"context"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/plugin"
)

func TestHintsAddWarning(t *testing.T) {
	resp := appendDiagnostic(nil, 3, severityError, "reading credentials", "open /home/u/.aws/credentials: permission denied")
	resp = appendDiagnostic(resp, 3, severityWarning, "unrelated", "")
	h := WithHints("/srv/infra")(nil)
	run := func(method string, r []byte) []byte {
		out, err := h.Unary(context.Background(), &plugin.Call{Method: method}, func(context.Context, []byte) ([]byte, error) { return r, nil })
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := diagnostics(run("/tfplugin6.Provider/ApplyResourceChange", resp), 3)
	if len(got) != 3 || got[2].Severity != "warning" || !strings.HasPrefix(got[2].Summary, "oprov: ") {
		t.Fatalf("diagnostics: %+v", got)
	}
	out := run("/tfplugin6.Provider/ApplyResourceChange", resp)
	ds := plugin.WireFields(out, 3)
	if detail := string(plugin.WireField(ds[2], diagDetail)); !strings.Contains(detail, `read = ["/home/u/.aws/credentials"]`) {
		t.Errorf("suggestion: %q", detail)
	}
	plain := appendDiagnostic(nil, 3, severityError, "fine", "")
	if out := run("/tfplugin6.Provider/ApplyResourceChange", plain); string(out) != string(plain) {
		t.Error("a response without a refusal changed")
	}
	// A relative path (a Python provider given ${path.module}/kv.json) is read against the
	// provider's working directory.
	rel := appendDiagnostic(nil, 3, severityError, "Reading kv_entry", "PermissionError: [Errno 13] Permission denied: './kv.json'")
	if ds := plugin.WireFields(run("/tfplugin6.Provider/ApplyResourceChange", rel), 3); len(ds) != 2 || !strings.Contains(string(plugin.WireField(ds[1], diagDetail)), `write = ["/srv/infra"]`) {
		t.Errorf("a relative path: %d diagnostics", len(ds))
	}
	net := appendDiagnostic(nil, 2, severityError, "dial tcp 10.1.2.3:8443: connect: permission denied", "")
	if ds := plugin.WireFields(run("/tfplugin5.Provider/ReadDataSource", net), 2); len(ds) != 2 || !strings.Contains(string(plugin.WireField(ds[1], diagDetail)), "connect = [8443]") {
		t.Errorf("protocol 5 ReadDataSource: %d diagnostics", len(ds))
	}
}
