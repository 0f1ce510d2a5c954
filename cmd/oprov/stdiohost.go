package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/oprov/oprov/pkg/stdiohost"
)

// stdioHostCommand is the hidden first argument that makes this process a provider: the host of
// a stdio provider directory, started by tofu, Terraform or oprov's launcher as any provider is.
const stdioHostCommand = "__stdio-host"

// runStdioHost serves the stdio provider in args[0] over plugin protocol 6 (go-plugin's
// handshake on stdout). It runs before cobra and signal handling: tofu ends providers itself.
func runStdioHost(args []string, errOut io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintf(errOut, "oprov %s DIR: DIR is a directory holding %s (this command is what a stdio provider's executable runs)\n", stdioHostCommand, stdiohost.ManifestName)
		return exitUsage
	}
	dir, err := filepath.Abs(args[0])
	if err == nil {
		err = stdiohost.Serve(dir, currentVersion().Version)
	}
	if err != nil {
		fmt.Fprintf(errOut, "oprov: stdio provider %s: %v\n", args[0], err)
		return exitError
	}
	return exitOK
}
