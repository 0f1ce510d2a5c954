package config

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/oprov/oprov/pkg/middleware"
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
