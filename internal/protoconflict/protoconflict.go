// Package protoconflict lets two copies of plugin protocol 6's descriptors live in one binary:
// oprov's own (pkg/plugin/tfplugin6, the client) and terraform-plugin-go's (the server that
// hosts stdio providers, pkg/stdiohost). Both register the file "tfplugin6.proto" and its
// names in protobuf's global registry, which panics on the second registration unless
// GOLANG_PROTOBUF_REGISTRATION_CONFLICT says otherwise. Nothing in oprov looks messages up in
// that registry by name (each generated message carries its own descriptor), so the second
// copy's registration can be skipped.
//
// The variable must be set before either package's init runs. Go initializes packages in
// import-path order among those whose dependencies are ready (the spec's rule since Go 1.21);
// this package depends on os alone and its path sorts before github.com/oprov/oprov/pkg/...,
// so it runs before oprov's copy, the second to register. Restore takes the variable out of
// the environment again so that providers oprov starts do not inherit it.
package protoconflict

import "os"

const env = "GOLANG_PROTOBUF_REGISTRATION_CONFLICT"

var setHere bool

func init() {
	if os.Getenv(env) == "" {
		setHere = os.Setenv(env, "ignore") == nil
	}
}

// Restore removes the variable if this package set it.
func Restore() {
	if setHere {
		os.Unsetenv(env)
		setHere = false
	}
}
