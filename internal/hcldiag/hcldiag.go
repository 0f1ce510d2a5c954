// Package hcldiag turns HCL diagnostics into one error whose lines point at file:line.
package hcldiag

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Decode parses an HCL file's content and decodes it into target (gohcl tags); errors point at
// file:line.
func Decode(file string, src []byte, target any) error {
	f, diags := hclsyntax.ParseConfig(src, file, hcl.InitialPos)
	if diags.HasErrors() {
		return Error(diags)
	}
	if diags := gohcl.DecodeBody(f.Body, nil, target); diags.HasErrors() {
		return Error(diags)
	}
	return nil
}

// Error joins the error diagnostics, each as "file:line: summary: detail".
func Error(diags hcl.Diagnostics) error {
	var msgs []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		where := ""
		if d.Subject != nil {
			where = fmt.Sprintf("%s:%d: ", d.Subject.Filename, d.Subject.Start.Line)
		}
		msg := where + d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// At is "file:line" of a range, as errors point at it.
func At(r hcl.Range) string { return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line) }

// String reads an attribute decoded as *hcl.Attribute (so that its line is known) as a string.
func String(a *hcl.Attribute) (string, error) {
	var s string
	if diags := gohcl.DecodeExpression(a.Expr, nil, &s); diags.HasErrors() {
		return "", Error(diags)
	}
	return s, nil
}
