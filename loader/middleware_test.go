package loader

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/plugin"
)

// With no audit and no rules nothing is put in front of a provider. An audit file that cannot be
// opened stops the run, naming on_error = "continue" as the way on; with it, the run goes on
// with a warning (and no middleware when there are no rules). An audit that opens is put in
// front of every member and closed by what withMiddleware gives back.
func TestWithMiddleware(t *testing.T) {
	dir := t.TempDir()
	members := func() []plugin.Member {
		return []plugin.Member{{Addr: "example.com/acme/hello"}, {Addr: "example.com/acme/far", Remote: &plugin.RemoteOptions{}}}
	}
	ls := []Launchable{{Addr: "example.com/acme/hello", Version: "1.0.0"}, {Addr: "example.com/acme/far", Version: "2.0.0"}}
	sbs, where := []string{"none", "none"}, []string{"", "ssh://host"}
	ctx := context.Background()
	var stderr bytes.Buffer

	ms := members()
	p := &Project{Dir: dir, Config: &config.Config{}}
	closer, err := p.withMiddleware(ctx, ms, ls, sbs, where, &stderr)
	if err != nil || closer == nil || ms[0].Middleware != nil || ms[1].Middleware != nil {
		t.Fatalf("no audit, no rules: middleware set or error %v", err)
	}
	closer()

	missing := filepath.Join(dir, "no", "such", "dir", "audit.jsonl")
	p.Config.Audit = &config.AuditConfig{Path: missing}
	if _, err := p.withMiddleware(ctx, members(), ls, sbs, where, &stderr); err == nil || !strings.Contains(err.Error(), `on_error = "continue"`) {
		t.Errorf("an audit that cannot be opened: %v", err)
	}
	p.Config.Audit.Continue = true
	ms = members()
	closer, err = p.withMiddleware(ctx, ms, ls, sbs, where, &stderr)
	if err != nil || ms[0].Middleware != nil {
		t.Errorf("on_error = continue with no rules: middleware set or error %v", err)
	} else {
		closer()
	}
	if !strings.Contains(stderr.String(), "oprov: warning:") || !strings.Contains(stderr.String(), "without an audit trail") {
		t.Errorf("going on without the audit gave no warning: %q", stderr.String())
	}

	audit := filepath.Join(dir, "audit.jsonl")
	p.Config.Audit = &config.AuditConfig{Path: audit}
	ms = members()
	closer, err = p.withMiddleware(ctx, ms, ls, sbs, where, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Middleware == nil {
			t.Errorf("%s has no audit in front of it", m.Addr)
		}
	}
	closer()
	if _, err := os.Stat(audit); err != nil {
		t.Errorf("the audit file was not opened: %v", err)
	}
}
