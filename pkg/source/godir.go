package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/oprov/oprov/internal/build/gobuild"
	"github.com/oprov/oprov/pkg/cache"
)

func init() {
	registerLocalKind(LocalKind{
		Name:   "Go module",
		Detect: func(dir string) bool { return fileExists(filepath.Join(dir, "go.mod")) },
		Open: func(d LocalDir, env *Env) LocalSource {
			return &builtHere{d: d, env: env, fresh: "source, built", reused: "source, cached build",
				build: func(ctx context.Context, env *Env) (*Built, error) { return buildGo(ctx, env.Cache, d) }}
		},
	})
}

// DevVersion is the version a provider kept as source is built and reported as.
const DevVersion = "0.0.0-dev"

// Dev is DevVersion parsed.
var Dev = versions.MustParseVersion(DevVersion)

// Built is a source provider built for this machine.
type Built struct {
	Addr       string `json:"address"`
	Executable string `json:"executable"`
	Key        string `json:"source_hash"`
	Rebuilt    bool   `json:"rebuilt"`
}

// buildGo compiles a Go provider kept as source for this machine, unless the cache already holds a build of
// the same source tree (every file's name and content), Go version and platform.
func buildGo(ctx context.Context, c *cache.Cache, s LocalDir) (*Built, error) {
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return nil, errors.New("building a source provider needs the go toolchain on PATH")
	}
	host := Host()
	key, err := treeHash(s.Dir, strings.TrimSpace(string(goVersion))+" "+host.String(), hiddenOnly)
	if err != nil {
		return nil, err
	}
	name := "terraform-provider-" + s.Addr.Type
	if host.OS == "windows" {
		name += ".exe"
	}
	exe := filepath.Join(c.BuildDir(key), name)
	out := &Built{Addr: s.Addr.String(), Executable: exe, Key: key}
	out.Rebuilt, err = buildOnce(ctx, c, key, name, func(tmp string) error {
		if err := gobuild.Build(ctx, s.Dir, host, DevVersion, filepath.Join(tmp, name)); err != nil {
			return fmt.Errorf("provider %s: %w", s.Addr, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// buildOnce makes the build directory builds/KEY holding the executable name, unless the cache
// has it: build fills a temporary directory, which is renamed into place once complete, under a
// lock so that concurrent runs build it once. It reports whether it built.
func buildOnce(ctx context.Context, c *cache.Cache, key, name string, build func(tmp string) error) (bool, error) {
	dir := c.BuildDir(key)
	exe := filepath.Join(dir, name)
	if fileExists(exe) {
		c.MarkUsed(dir)
		return false, nil
	}
	unlock, err := c.Lock(ctx, "build-"+key)
	if err != nil {
		return false, err
	}
	defer unlock()
	if fileExists(exe) {
		return false, nil
	}
	tmpRoot, err := c.TmpDir()
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp(tmpRoot, "build-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	if err := build(tmp); err != nil {
		return false, err
	}
	if err := cache.SealDir(tmp); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return false, err
	}
	return true, nil
}

// hiddenOnly skips hidden files and directories, and nothing else.
func hiddenOnly(name string, _ bool) bool { return strings.HasPrefix(name, ".") }

// treeHash hashes a directory's regular files (names and contents, leaving out what skip says)
// together with extra, as a hex sha256.
func treeHash(root, extra string, skip func(name string, isDir bool) bool) (string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && skip(d.Name(), d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading provider source %s: %w", root, err)
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", extra)
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s\x00", filepath.ToSlash(rel))
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		fileSum := sha256.New()
		_, err = io.Copy(fileSum, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
		h.Write(fileSum.Sum(nil))
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}
