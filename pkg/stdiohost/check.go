package stdiohost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/zclconf/go-cty/cty"
)

// Steps is a file of steps for `oprov provider check` (docs/stdio-protocol.md): the provider's
// configuration, then resource, data source and function steps run in order through oprov's
// own planning, as tofu would drive them.
type Steps struct {
	Config json.RawMessage `json:"config"`
	Steps  []Step          `json:"steps"`
}

// Step is one step. Exactly one of Apply, Destroy, Import, Read, Data and Call names it.
type Step struct {
	Apply   string          `json:"apply"`   // resource TYPE.NAME: plan then apply config
	Destroy string          `json:"destroy"` // resource TYPE.NAME
	Import  string          `json:"import"`  // resource TYPE.NAME, with ID
	Read    string          `json:"read"`    // resource TYPE.NAME: refresh
	Data    string          `json:"data"`    // data source TYPE
	Call    string          `json:"call"`    // function NAME, with Args
	ID      string          `json:"id"`
	Config  json.RawMessage `json:"config"`
	Args    []any           `json:"args"`
	// Expect holds what the result must contain: attributes of the state, or a function's
	// result. ExpectReplace says whether an apply must replace; ExpectError, a part of the error.
	Expect        json.RawMessage `json:"expect"`
	ExpectReplace *bool           `json:"expect_replace"`
	ExpectError   string          `json:"expect_error"`
}

// StepResult is what one step did.
type StepResult struct {
	Step  int             `json:"step"` // 0: the provider's configuration
	What  string          `json:"what"`
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Check runs the steps against the provider in dir, telling report about each, and stops at
// the first that fails, with an error naming it.
func Check(ctx context.Context, dir string, steps *Steps, report func(StepResult)) error {
	h, err := newHost(dir, os.Stderr)
	if err != nil {
		return err
	}
	// No tofu here: the steps' relative paths are the provider directory's, as a test of it reads.
	h.workDir = dir
	defer h.Close()
	c := &checker{h: h, state: map[string]cty.Value{}}
	if err := c.configure(ctx, steps.Config); err != nil {
		report(StepResult{What: "configure", Error: err.Error()})
		return fmt.Errorf("configure: %w", err)
	}
	report(StepResult{What: "configure", OK: true})
	for i, s := range steps.Steps {
		what, got, err := c.run(ctx, s)
		r := StepResult{Step: i + 1, What: what, OK: true, Value: got.value}
		if err = judge(s, got, err); err != nil {
			r.OK, r.Error = false, err.Error()
			report(r)
			return fmt.Errorf("step %d (%s): %w", i+1, what, err)
		}
		report(r)
	}
	return nil
}

type checker struct {
	h     *Host
	state map[string]cty.Value // by TYPE.NAME
}

// result is what a step produced: a JSON value to compare with expect, and for an apply
// whether it replaced.
type result struct {
	value    json.RawMessage
	replaced bool
}

func judge(s Step, got result, err error) error {
	if s.ExpectError != "" {
		if err == nil || !strings.Contains(err.Error(), s.ExpectError) {
			return fmt.Errorf("want an error containing %q, got %v", s.ExpectError, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if s.ExpectReplace != nil && *s.ExpectReplace != got.replaced {
		return fmt.Errorf("replaced = %t, want %t", got.replaced, *s.ExpectReplace)
	}
	if len(s.Expect) > 0 {
		want, _ := decodeJSON(s.Expect)
		have, _ := decodeJSON(orNull(got.value))
		if !contains(have, want) {
			return fmt.Errorf("got %s, want it to contain %s", got.value, s.Expect)
		}
	}
	return nil
}

// contains says whether have holds want: objects by the keys want names, anything else equal.
func contains(have, want any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		a, _ := json.Marshal(have)
		b, _ := json.Marshal(want)
		return bytes.Equal(a, b)
	}
	hm, ok := have.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !contains(hm[k], v) {
			return false
		}
	}
	return true
}

func (c *checker) configure(ctx context.Context, cfg json.RawMessage) error {
	s, err := c.h.ready(ctx)
	if err != nil {
		return err
	}
	dv, err := valueDV(cfg, s.provider.ty)
	if err != nil {
		return err
	}
	resp, _ := c.h.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: dv})
	return diagErr(resp.Diagnostics)
}

func (c *checker) run(ctx context.Context, s Step) (string, result, error) {
	switch {
	case s.Apply != "":
		r, err := c.apply(ctx, s.Apply, s.Config)
		return "apply " + s.Apply, r, err
	case s.Destroy != "":
		r, err := c.apply(ctx, s.Destroy, nil)
		return "destroy " + s.Destroy, r, err
	case s.Import != "":
		r, err := c.importOne(ctx, s.Import, s.ID)
		return "import " + s.Import + " " + s.ID, r, err
	case s.Read != "":
		r, err := c.read(ctx, s.Read)
		return "read " + s.Read, r, err
	case s.Data != "":
		r, err := c.data(ctx, s.Data, s.Config)
		return "data " + s.Data, r, err
	case s.Call != "":
		r, err := c.call(ctx, s.Call, s.Args)
		return "call " + s.Call, r, err
	}
	return "?", result{}, errors.New("a step names none of apply, destroy, import, read, data, call")
}

func diagErr(ds []*tfprotov6.Diagnostic) error {
	var msgs []string
	for _, d := range ds {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			m := d.Summary
			if d.Detail != "" {
				m += ": " + d.Detail
			}
			if d.Attribute != nil && len(d.Attribute.Steps()) > 0 {
				m += " (at " + d.Attribute.String() + ")"
			}
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// valueDV reads a JSON object given in the steps as a value of ty.
func valueDV(raw json.RawMessage, ty cty.Type) (*tfprotov6.DynamicValue, error) {
	v, err := readState(orNull(raw), ty, cty.NilVal)
	if err != nil {
		return nil, err
	}
	if v.IsNull() && ty.IsObjectType() {
		v, _ = readState(json.RawMessage("{}"), ty, cty.NilVal)
	}
	return encodeDV(v, ty)
}
