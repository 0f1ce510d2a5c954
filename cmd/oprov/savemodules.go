package main

import (
	"context"
	"fmt"

	"github.com/oprov/oprov/pkg/bundle"
	"github.com/oprov/oprov/pkg/module"
)

// walkModules resolves every remote module call of the configuration (module.Walk), following
// its module lock, for save --config to carry: each module is fetched, zipped and hashed, and
// refused when the lock records other hashes.
func walkModules(ctx context.Context, o *saveOptions) (*module.Tree, *module.Lock, error) {
	lock, err := module.ReadLock(o.Config)
	if err != nil {
		return nil, nil, err
	}
	reg := o.registry.options()
	tree, err := module.Walk(ctx, o.Config, module.Options{Lock: lock, CAFile: reg.CAFile, Registry: reg, Log: o.io.ErrOut})
	if err != nil {
		return nil, nil, err
	}
	return tree, lock, nil
}

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
