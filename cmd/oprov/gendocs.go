//go:build gendocs

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manDate is the date in the man pages' header. It is fixed so that generating twice gives the
// same bytes (cobra would write today's month); change it when the manual's form changes.
var manDate = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

func init() {
	extraCommands = append(extraCommands, newGendocsCmd)
}

// newGendocsCmd writes the command reference: DIR/reference/*.md and DIR/man/*.1, from the same
// command tree and help texts 'oprov --help' prints. scripts/gendocs.sh runs it.
func newGendocsCmd(io *IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:    "__gendocs DIR",
		Short:  "Write the Markdown reference and the man pages into DIR/reference and DIR/man",
		Hidden: true,
		Args:   argsRange(1, 1, "one directory"),
		RunE: func(c *cobra.Command, args []string) error {
			return genDocs(c.Root(), args[0])
		},
	}
}

func genDocs(root *cobra.Command, dir string) error {
	root.DisableAutoGenTag = true
	for _, c := range docCommandTree(root) {
		c.DisableAutoGenTag = true
	}
	ref, man := filepath.Join(dir, "reference"), filepath.Join(dir, "man")
	for _, d := range []string{ref, man} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := doc.GenMarkdownTree(root, ref); err != nil {
		return fmt.Errorf("writing the Markdown reference: %w", err)
	}
	header := &doc.GenManHeader{Title: "OPROV", Section: "1", Date: &manDate, Source: "oprov", Manual: "oprov manual"}
	if err := doc.GenManTree(root, header, man); err != nil {
		return fmt.Errorf("writing the man pages: %w", err)
	}
	return nil
}

func docCommandTree(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		out = append(out, docCommandTree(sub)...)
	}
	return out
}
