package loader

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/pkg/middleware"
	"github.com/oprov/oprov/pkg/plugin"
)

// AuditConfig is oprov.hcl's audit block.
type AuditConfig struct {
	Path   string // absolute, or "-" for stderr
	Values bool
	// Continue: on_error = "continue", calls go on when the audit cannot be written; by
	// default ("fail") they fail.
	Continue bool
}

type auditFile struct {
	Path      string    `hcl:"path"`
	Values    *bool     `hcl:"values,optional"`
	OnError   *string   `hcl:"on_error,optional"`
	DeclRange hcl.Range `hcl:",def_range"`
}

type ruleFile struct {
	Name      string         `hcl:"name,label"`
	Deny      hcl.Expression `hcl:"deny,optional"`
	Warn      hcl.Expression `hcl:"warn,optional"`
	Message   *string        `hcl:"message,optional"`
	DeclRange hcl.Range      `hcl:",def_range"`
}

// parseMiddleware checks the audit block and compiles every rule, so a bad rule is reported at
// its file:line before any provider starts.
func (c *Config) parseMiddleware(cf *configFile) error {
	if a := cf.Audit; a != nil {
		if a.Path == "" {
			return fmt.Errorf("%s:%d: audit: path is empty (give a file, or \"-\" for stderr)", a.DeclRange.Filename, a.DeclRange.Start.Line)
		}
		c.Audit = &AuditConfig{Path: a.Path, Values: a.Values != nil && *a.Values}
		if a.OnError != nil {
			switch *a.OnError {
			case "fail":
			case "continue":
				c.Audit.Continue = true
			default:
				return fmt.Errorf("%s:%d: audit: on_error = %q: want \"fail\" (the default: a call whose record cannot be written fails) or \"continue\"", a.DeclRange.Filename, a.DeclRange.Start.Line, *a.OnError)
			}
		}
		if a.Path != "-" && !filepath.IsAbs(a.Path) {
			c.Audit.Path = filepath.Join(filepath.Dir(c.Path), a.Path)
		}
	}
	seen := map[string]bool{}
	for _, rf := range cf.Rules {
		at := fmt.Sprintf("%s:%d", rf.DeclRange.Filename, rf.DeclRange.Start.Line)
		if seen[rf.Name] {
			return fmt.Errorf("%s: rule %q is declared twice", at, rf.Name)
		}
		seen[rf.Name] = true
		r, err := parseRule(rf, at)
		if err != nil {
			return err
		}
		c.Rules = append(c.Rules, r)
	}
	return nil
}

// parseRule compiles one rule block: exactly one of deny and warn, a CEL expression.
func parseRule(rf ruleFile, at string) (*middleware.Rule, error) {
	effect, expr := "", rf.Deny
	for name, e := range map[string]hcl.Expression{middleware.Deny: rf.Deny, middleware.Warn: rf.Warn} {
		if !isSet(e) {
			continue
		}
		if effect != "" {
			return nil, fmt.Errorf("%s: rule %q: give deny or warn, not both", at, rf.Name)
		}
		effect, expr = name, e
	}
	if effect == "" {
		return nil, fmt.Errorf("%s: rule %q: give deny = \"CEL expression\" or warn = \"...\"", at, rf.Name)
	}
	line := fmt.Sprintf("%s:%d", expr.Range().Filename, expr.Range().Start.Line)
	v, diags := expr.Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
		return nil, fmt.Errorf("%s: rule %q: %s must be a string holding a CEL expression", line, rf.Name, effect)
	}
	msg := ""
	if rf.Message != nil {
		msg = *rf.Message
	}
	r, err := middleware.NewRule(rf.Name, effect, v.AsString(), msg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", line, err)
	}
	return r, nil
}

// isSet reports whether an optional attribute was given (gohcl gives an absent one as null).
func isSet(e hcl.Expression) bool {
	if e == nil {
		return false
	}
	v, diags := e.Value(nil)
	return diags.HasErrors() || !v.IsNull()
}

// withMiddleware puts the audit and the rules between tofu and each member. It returns what
// closes the audit file.
func (p *Project) withMiddleware(ctx context.Context, members []plugin.Member, ls []Launchable, stderr io.Writer) (func(), error) {
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
		l := ls[i]
		members[i].Middleware = func(pr *plugin.Provider) (plugin.Middleware, error) {
			mc := middleware.Config{Provider: l.Addr, Version: l.Version, Audit: audit, Rules: cfg.Rules, Warn: warn}
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
