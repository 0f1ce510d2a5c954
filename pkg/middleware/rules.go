package middleware

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// Effects of a rule.
const (
	Deny = "deny" // an error diagnostic: the plan (or apply) fails
	Warn = "warn" // a warning diagnostic
)

// Rule is one policy rule: a CEL expression over a resource change that, when true, denies or
// warns. Expressions read:
//
//	resource.type, resource.address  the resource type (data source, function, ...), and its
//	                                 address when known ("" otherwise: the protocol does not tell
//	                                 providers)
//	resource.kind                    resource, data_source, ephemeral_resource, function, action
//	                                 or state_store
//	resource.source_type             for a move, the type the object moves from
//	action                           "create", "update", "replace", "delete", "no-op", "import",
//	                                 "move", "read", "open", "renew", "close", "call", "invoke",
//	                                 ... (see the README)
//	prior, planned                   the values before and after (null when absent)
//	provider                         the provider's address, e.g. "example.com/acme/hello"
//
// A rule that cannot be evaluated (a value that did not decode, a missing key, a type error)
// counts against the call: a deny rule denies it, a warn rule warns (see Matches).
type Rule struct {
	Name    string
	Effect  string
	Expr    string
	Message string
	prg     cel.Program
}

// celEnv is built on first use: most commands never evaluate a rule.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("resource", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("action", cel.StringType),
		cel.Variable("prior", cel.DynType),
		cel.Variable("planned", cel.DynType),
		cel.Variable("provider", cel.StringType),
	)
})

// NewRule compiles a rule; a syntax or type error, or an expression that is not a boolean, is an
// error that quotes CEL's own message (with the line and column in the expression).
func NewRule(name, effect, expr, message string) (*Rule, error) {
	if effect != Deny && effect != Warn {
		return nil, fmt.Errorf("rule %q: effect %q: want %q or %q", name, effect, Deny, Warn)
	}
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("rule %q: %v", name, iss.Err())
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("rule %q: the expression gives %s, not a boolean", name, t)
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, fmt.Errorf("rule %q: %v", name, err)
	}
	return &Rule{Name: name, Effect: effect, Expr: expr, Message: message, prg: prg}, nil
}

// Change is what a rule is evaluated on.
type Change struct {
	Kind, Type, SourceType, Address, Action, Provider string
	Prior, Planned                                    any
	// Err says why the values could not be decoded: then prior and planned are not given to the
	// rule at all, and a rule that reads them fails to evaluate (one that decides without them,
	// on resource.type say, still can).
	Err error

	// secrets are the string forms of the change's secret values (sensitive attributes, a
	// function's arguments), kept out of an evaluation error's text (scrub.go).
	secrets []string
	// dup names a singular message field that occurred more than once: protobuf merges the
	// occurrences, so the value decoded is not what the peer reads, and judge denies the call.
	dup []string
}

// Matches evaluates the rule on a change. An evaluation error (a missing key, values that did
// not decode) is returned; the caller counts it against the call (a deny rule denies).
func (r *Rule) Matches(c Change) (bool, error) {
	vars := map[string]any{
		"resource": map[string]string{"type": c.Type, "address": c.Address, "kind": c.Kind, "source_type": c.SourceType},
		"action":   c.Action, "provider": c.Provider,
	}
	if c.Err == nil {
		vars["prior"], vars["planned"] = c.Prior, c.Planned
	}
	out, _, err := r.prg.Eval(vars)
	if err != nil {
		if c.Err != nil {
			return false, fmt.Errorf("rule %q: %s (the values did not decode: %s)", r.Name, scrub(err.Error(), c.secrets), scrub(c.Err.Error(), c.secrets))
		}
		return false, fmt.Errorf("rule %q: %s", r.Name, scrub(err.Error(), c.secrets))
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("rule %q gave %s, not a boolean", r.Name, scrub(fmt.Sprint(out.Value()), c.secrets))
	}
	return b, nil
}
