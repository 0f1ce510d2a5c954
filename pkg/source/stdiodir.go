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

func init() {
	registerLocalKind(LocalKind{
		Name:   "stdio provider (" + stdiohost.ManifestName + ")",
		Detect: func(dir string) bool { return fileExists(filepath.Join(dir, stdiohost.ManifestName)) },
		First:  true,
		Open: func(d LocalDir, env *Env) LocalSource {
			return &builtHere{d: d, env: env, fresh: "source, stdio", reused: "source, stdio",
				build: func(ctx context.Context, env *Env) (*Built, error) { return launchStdio(ctx, env.Cache, d) }}
		},
	})
}

// launchStdio makes the executable that runs a stdio provider kept as source: a small sh script
// that execs this oprov as the provider's host (`oprov __stdio-host DIR`). Nothing is copied or
// built: the program runs from its directory, so an edit takes effect on the next run.
func launchStdio(ctx context.Context, c *cache.Cache, s LocalDir) (*Built, error) {
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
	sum := sha256.Sum256([]byte("stdio\x00" + self + "\x00" + s.Dir))
	key := "stdio-" + hex.EncodeToString(sum[:])[:32]
	name := "terraform-provider-" + s.Addr.Type
	out := &Built{Addr: s.Addr.String(), Executable: filepath.Join(c.BuildDir(key), name), Key: key}
	out.Rebuilt, err = buildOnce(ctx, c, key, name, func(tmp string) error {
		script := fmt.Sprintf("#!/bin/sh\n# %s: the stdio provider in %s, hosted by oprov.\nexec %s %s %s\n",
			name, s.Dir, shellQuote(self), stdiohostCommand, shellQuote(s.Dir))
		return os.WriteFile(filepath.Join(tmp, name), []byte(script), 0o755)
	})
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", s.Addr, err)
	}
	return out, nil
}

// stdiohostCommand is oprov's hidden command that hosts a stdio provider (cmd/oprov).
const stdiohostCommand = "__stdio-host"

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
