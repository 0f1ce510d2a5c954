package main

import (
	"fmt"
	"strings"

	"github.com/oprov/oprov/pkg/bundle"
)

// loadedModules is what load says of the module packages it loaded (and checked).
type loadedModules struct {
	Modules []bundle.PrintedModule `json:"modules,omitempty"`
	// ServeModules are `oprov serve` arguments that answer the Module Registry Protocol for the
	// registry modules, for fleets of plain tofu or terraform.
	ServeModules [][]string `json:"serve_modules,omitempty"`
}

func modulesLoaded(rep *bundle.LoadReport, to string) loadedModules {
	if rep.Printable == nil || len(rep.Printable.Modules) == 0 {
		return loadedModules{}
	}
	return loadedModules{Modules: rep.Printable.ModuleSources(to), ServeModules: rep.Printable.ModuleServeArgs(to)}
}

// printLoadedModules says where each module call's package now is, and how a module registry
// answers for the registry modules.
func printLoadedModules(o *loadOptions, m loadedModules) {
	if len(m.Modules) == 0 {
		return
	}
	fmt.Fprintf(o.io.Out, "\nModules (OpenTofu module packages, each checked against the listing's h1: and zh: hashes):\n\n")
	for _, p := range m.Modules {
		fmt.Fprintf(o.io.Out, "  %s  %s %s\n    %s\n", p.Call, p.Source, p.Version, p.OCISource)
	}
	if len(m.ServeModules) == 0 {
		return
	}
	fmt.Fprintf(o.io.Out, "\nFor plain tofu or terraform, oprov serve answers the Module Registry Protocol for the registry modules:\n\n")
	for _, args := range m.ServeModules {
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = a
			if strings.ContainsAny(a, "${}*") {
				quoted[i] = "'" + a + "'"
			}
		}
		fmt.Fprintf(o.io.Out, "  oprov serve %s\n", strings.Join(quoted, " "))
	}
}
