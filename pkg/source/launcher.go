package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// launcherRecord is the file beside a launcher oprov made on this machine (a build of a provider
// kept as source) that says what the launcher runs. It lives only in the cache's build
// directories, where nothing but oprov's builds is written; a package from a registry may carry a
// file of the same name, but nothing reads it there (see ReadLauncher).
const launcherRecord = ".oprov-launcher.json"

// Launcher kinds.
const (
	// LauncherStdio hosts the stdio provider in Source with the oprov at Host.
	LauncherStdio = "stdio"
	// LauncherVenv runs a console script with the Python of the venv beside it.
	LauncherVenv = "python-venv"
)

// Launcher is what oprov recorded when it made a provider's launcher: which kind it is and, for a
// stdio provider, the directory it hosts (the configuration's) and the oprov that hosts it. A
// sandbox grants what a launcher runs from this record, never from the launcher's bytes.
type Launcher struct {
	Kind   string `json:"kind"`
	Source string `json:"source,omitempty"`
	Host   string `json:"host,omitempty"`
}

// writeLauncher records l in dir, the build directory Make fills.
func writeLauncher(dir string, l Launcher) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, launcherRecord), b, 0o644)
}

// ReadLauncher reads the record in the directory of a package oprov built on this machine
// (cache.Build); nil when there is none (a Go provider). Call it only for such a package: in a
// package unpacked from a zip the same name is the package's own, not oprov's.
func ReadLauncher(dir string) (*Launcher, error) {
	b, err := os.ReadFile(filepath.Join(dir, launcherRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var l Launcher
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w (remove that build directory: oprov makes it again)", filepath.Join(dir, launcherRecord), err)
	}
	return &l, nil
}
