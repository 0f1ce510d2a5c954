package main

import (
	"fmt"

	"github.com/oprov/oprov/pkg/bundle"
)

// printSavedModules says, a line each, which module calls save --config carried.
func printSavedModules(o *saveOptions, l *bundle.Listing) {
	for _, m := range l.Modules {
		state := ""
		if !m.InBundle {
			state = " (unchanged since the base: left out)"
		}
		v := m.Version
		if v == "" {
			v = m.ZH
		}
		fmt.Fprintf(o.io.Out, "%s: %s %s as %s:%s (%s), version: %s%s\n", m.Call, m.Source, v, m.Repository, m.Tag, m.H1, m.VersionFrom, state)
	}
}
