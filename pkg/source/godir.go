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

	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/gobuild"
)

// goKind is a Go module: built with go build.
var goKind = LocalKind{
	Name:   "Go module",
	Detect: func(dir string) bool { return fileExists(filepath.Join(dir, "go.mod")) },
	Open: func(d LocalDir, env *Env) LocalSource {
		return &builtHere{d: d, env: env, reused: "source, cached build", build: func(ctx context.Context, _ *Env) (*cache.Build, error) { return goBuild(d) }}
	},
}

// DevVersion is the version a provider kept as source is built and reported as.
const DevVersion = "0.0.0-dev"

// Dev is DevVersion parsed.
var Dev = versions.MustParseVersion(DevVersion)

// goBuild says how to build a Go provider kept as source for this machine: the key covers the
// source tree (every file's name and content), the Go version and the platform.
func goBuild(s LocalDir) (*cache.Build, error) {
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
	return &cache.Build{Key: key, Name: name, Fresh: "source, built", Make: func(ctx context.Context, dir string) error {
		return gobuild.Build(ctx, s.Dir, host, DevVersion, filepath.Join(dir, name))
	}}, nil
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
