package config

import (
	"github.com/oprov/oprov/pkg/module"
)

// Requirement is what a configuration asks of one provider: all the version constraints given
// for it across the modules read (module.Requirement).
type Requirement = module.Requirement

// ReadRequirements reads the required_providers of the module in dir and of every module it calls
// by a local path (./ or ../), keyed by provider address. Remote modules' requirements come from
// a module walk (module.Walk), which fetches them.
func ReadRequirements(dir string) (map[string]*Requirement, error) {
	return module.Requirements(dir)
}
