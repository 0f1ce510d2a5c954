package loader

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/oprov/oprov/pkg/middleware"
	"github.com/oprov/oprov/pkg/plugin"
)

// withMiddleware puts the audit and the rules between tofu and each member. It returns what
// closes the audit file.
func (p *Project) withMiddleware(ctx context.Context, members []plugin.Member, ls []Launchable, sandboxes, where []string, stderr io.Writer) (func(), error) {
	cfg := p.Config
	if cfg.Audit == nil && len(cfg.Rules) == 0 {
		return func() {}, nil
	}
	var audit *middleware.Audit
	warn := func(s string) { fmt.Fprintf(stderr, "oprov: warning: %s\n", s) }
	if cfg.Audit != nil {
		var err error
		if audit, err = middleware.OpenAudit(cfg.Audit.Path, cfg.Audit.Values, stderr); err != nil {
			if !cfg.Audit.Continue {
				return nil, fmt.Errorf("%w (on_error = \"continue\" in the audit block goes on without it)", err)
			}
			warn(fmt.Sprintf("%v; on_error = \"continue\": going on without an audit trail", err))
			if len(cfg.Rules) == 0 {
				return func() {}, nil
			}
		} else {
			audit.Continue, audit.Warn = cfg.Audit.Continue, warn
		}
	}
	for i := range members {
		l, sb, remote := ls[i], sandboxes[i], ""
		if members[i].Remote != nil {
			remote = where[i]
		}
		members[i].Middleware = func(pr *plugin.Provider) (plugin.Middleware, error) {
			mc := middleware.Config{Provider: l.Addr, Version: l.Version, Audit: audit, Rules: cfg.Rules, Warn: warn}
			if err := auditLaunch(audit, mc, pr, sb, remote); err != nil {
				return nil, err
			}
			if len(cfg.Rules) > 0 || (audit != nil && audit.Values) {
				s, err := schemaFor(ctx, pr, audit, mc)
				if err != nil {
					return nil, err
				}
				mc.Schema = s
			}
			return middleware.New(mc)
		}
	}
	return func() {
		if audit != nil {
			audit.Close()
		}
	}, nil
}

// schemaFor asks a provider for its schema, to decode values with; the audit records the call as
// oprov's own.
func schemaFor(ctx context.Context, pr *plugin.Provider, audit *middleware.Audit, mc middleware.Config) (*plugin.ProviderSchema, error) {
	start := time.Now()
	s, err := pr.Schema(ctx)
	if audit != nil {
		rec := &middleware.Record{Time: start.UTC().Format(time.RFC3339Nano), Provider: mc.Provider, Version: mc.Version, RPC: "GetProviderSchema", Caller: "oprov",
			DurationMS: float64(time.Since(start).Microseconds()) / 1000}
		if err != nil {
			rec.Error = err.Error()
		}
		if werr := audit.Put(rec); werr != nil {
			return nil, werr
		}
	}
	return s, err
}

// auditLaunch records that oprov launched a provider, and under which sandbox.
func auditLaunch(audit *middleware.Audit, mc middleware.Config, pr *plugin.Provider, sb, remote string) error {
	if audit == nil {
		return nil
	}
	return audit.Put(&middleware.Record{Time: time.Now().UTC().Format(time.RFC3339Nano), Provider: mc.Provider, Version: mc.Version,
		RPC: "Launch", Caller: "oprov", Sandbox: sb, Pid: pr.Pid(), Remote: remote})
}
