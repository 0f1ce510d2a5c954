// Command oprov-sandbox is oprov's sandbox step on its own: what 'oprov __sandbox-exec' does,
// in a program small enough to start in about a millisecond (oprov's own start, with every
// package it links initialised, takes some 15-20 ms). oprov uses it when it finds it beside its
// own executable; without it, oprov runs itself.
package main

import (
	"fmt"
	"os"

	"github.com/oprov/oprov/pkg/sandbox"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != sandbox.ExecCommand {
		fmt.Fprintf(os.Stderr, "oprov-sandbox is started by oprov (as: oprov-sandbox %s SPEC-JSON PROVIDER [ARGS...])\n", sandbox.ExecCommand)
		os.Exit(2)
	}
	os.Exit(sandbox.Main(os.Args[2:]))
}
