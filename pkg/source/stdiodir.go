package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/stdiohost"
)

// stdioKind is a stdio provider: a program of any language oprov hosts. It is asked first: its
// manifest says what its directory is even when the directory is also a Go module or a Python
// project.
var stdioKind = LocalKind{
	Name:   "stdio provider (" + stdiohost.ManifestName + ")",
	Detect: func(dir string) bool { return fileExists(filepath.Join(dir, stdiohost.ManifestName)) },
	Open: func(d LocalDir, env *Env) LocalSource {
		return &builtHere{d: d, env: env, reused: "source, stdio", build: func(context.Context, *Env) (*cache.Build, error) { return stdioLauncher(d) }}
	},
}

// stdioLauncher says how to make the executable that runs a stdio provider kept as source: a
// small sh script that execs this oprov as the provider's host (`oprov __stdio-host DIR`). Nothing
// is copied or built: the program runs from its directory, so an edit takes effect on the next
// run.
func stdioLauncher(s LocalDir) (*cache.Build, error) {
	m, err := stdiohost.ReadManifest(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: provider %s: %w", s.At, s.Addr, err)
	}
	if m.Type != s.Addr.Type {
		return nil, fmt.Errorf("%s: provider %s: %s says its type is %q, not %q", s.At, s.Addr, filepath.Join(s.Dir, stdiohost.ManifestName), m.Type, s.Addr.Type)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("provider %s: finding oprov's own executable to host it: %w", s.Addr, err)
	}
	// The key's "record" marks builds that hold the launcher record (older ones are made again).
	sum := sha256.Sum256([]byte("stdio\x00record\x00" + self + "\x00" + s.Dir))
	name := "terraform-provider-" + s.Addr.Type
	return &cache.Build{Key: "stdio-" + hex.EncodeToString(sum[:])[:32], Name: name, Fresh: "source, stdio", Make: func(_ context.Context, dir string) error {
		script := fmt.Sprintf("#!/bin/sh\n# %s: the stdio provider in %s, hosted by oprov.\nexec %s %s %s\n",
			name, s.Dir, shellQuote(self), stdiohostCommand, shellQuote(s.Dir))
		if err := writeLauncher(dir, Launcher{Kind: LauncherStdio, Source: s.Dir, Host: self}); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755)
	}}, nil
}

// stdiohostCommand is oprov's hidden command that hosts a stdio provider (cmd/oprov).
const stdiohostCommand = "__stdio-host"

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
