package config

import (
	"github.com/oprov/oprov/pkg/module"
)

// Requirement is what a configuration asks of one provider: all the version constraints given
// for it across the modules read (module.Requirement).
type Requirement = module.Requirement
