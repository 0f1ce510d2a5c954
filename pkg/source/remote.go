package source

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/gobuild"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// BuildZipFor builds the provider kept as source in d for another machine's platform p and
// writes its package into dir, a release zip holding the one executable (as `oprov package`
// writes it, version DevVersion); it gives the zip's path. Only a Go module is built for another
// machine (cross-compiled, CGO off). A stdio provider runs from its directory here, and a Python
// project is installed into a venv of this machine's python: neither can be shipped as built, and
// each is an error saying what to do instead.
func BuildZipFor(ctx context.Context, d LocalDir, p manifest.Platform, dir string) (string, error) {
	switch {
	case stdioKind.Detect(d.Dir):
		return "", fmt.Errorf("%s: provider %q is a stdio provider kept as source, which runs from its directory on this machine and cannot run on another: package it (oprov package --stdio %s) and push it to a registry an oci_mirror block names, or leave it out of the remote block", d.At, d.Addr, d.Dir)
	case goKind.Detect(d.Dir):
	case pythonKind.Detect(d.Dir):
		return "", fmt.Errorf("%s: provider %q is a Python project kept as source, installed into a venv of this machine's python, which cannot run on another machine: package it for the far platform (oprov package --python %s --platform %s) and push it to a registry an oci_mirror block names, or leave it out of the remote block", d.At, d.Addr, d.Dir, p)
	default:
		return "", unknownDir{d}.err()
	}
	work := filepath.Join(dir, "build")
	exe := filepath.Join(work, providerrelease.ExecutableName(d.Addr.Type, DevVersion, p.OS))
	if err := gobuild.Build(ctx, d.Dir, p, DevVersion, exe); err != nil {
		return "", fmt.Errorf("%s: provider %q for the far side's platform %s: %w", d.At, d.Addr, p, err)
	}
	zipPath := filepath.Join(dir, providerrelease.Filename{Type: d.Addr.Type, Version: DevVersion, Platform: p}.String())
	f, err := os.OpenFile(zipPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	err = providerrelease.WriteZip(f, []providerrelease.ZipFile{{Name: filepath.Base(exe), Executable: true,
		Open: func() (io.ReadCloser, error) { return os.Open(exe) }}})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("packaging %s for %s: %w", d.Addr, p, err)
	}
	return zipPath, nil
}
