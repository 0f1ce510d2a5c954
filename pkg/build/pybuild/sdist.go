package pybuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BuildSdists builds, once, a wheel of every dependency of wheel that is published only as a
// source distribution, into outDir, which InstallForTarget then finds wheels in. pip resolves
// the dependencies for the host (with the pins as constraints), fetching a wheel where one
// exists and the sdist otherwise; each sdist is built with pip wheel, isolated and with the
// same index settings as every other pip run. A built wheel that is not pure Python
// (py3-none-any) is refused: it would run only on this machine's platform and CPython.
//
// It gives outDir, or "" when no dependency came as source.
func BuildSdists(ctx context.Context, python, wheel, pins, outDir string) (string, error) {
	dl := filepath.Join(outDir, "download")
	args := []string{"download", "-q", "-d", dl}
	if pins != "" {
		args = append(args, "-c", pins)
	}
	if err := pip(ctx, python, append(args, wheel)...); err != nil {
		return "", fmt.Errorf("resolving the dependencies: %w", err)
	}
	defer os.RemoveAll(dl)
	entries, err := os.ReadDir(dl)
	if err != nil {
		return "", err
	}
	built := filepath.Join(outDir, "built")
	n := 0
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".whl") || !(strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".zip")) {
			continue
		}
		one := filepath.Join(outDir, "one")
		if err := pip(ctx, python, "wheel", "-q", "--no-deps", "-w", one, filepath.Join(dl, name)); err != nil {
			return "", fmt.Errorf("building a wheel of the source distribution %s: %w", name, err)
		}
		wheels, _ := filepath.Glob(filepath.Join(one, "*.whl"))
		if len(wheels) != 1 {
			return "", fmt.Errorf("building a wheel of the source distribution %s gave %d wheels, want 1", name, len(wheels))
		}
		if err := checkPureWheel(filepath.Base(wheels[0])); err != nil {
			return "", err
		}
		if err := os.MkdirAll(built, 0o755); err != nil {
			return "", err
		}
		if err := os.Rename(wheels[0], filepath.Join(built, filepath.Base(wheels[0]))); err != nil {
			return "", err
		}
		os.RemoveAll(one)
		n++
	}
	if n == 0 {
		return "", nil
	}
	return built, nil
}

// checkPureWheel refuses a wheel built from a source distribution unless its tags say pure
// Python (abi "none", platform "any"), naming the package and version.
func checkPureWheel(file string) error {
	parts := strings.Split(strings.TrimSuffix(file, ".whl"), "-")
	if len(parts) < 5 {
		return fmt.Errorf("the wheel %s built from a source distribution has no tags", file)
	}
	name, version := parts[0], parts[1]
	abi, plat := parts[len(parts)-2], parts[len(parts)-1]
	if abi == "none" && plat == "any" {
		return nil
	}
	return fmt.Errorf("%s %s is published only as a source distribution, and it compiles (it builds %s, for this machine alone): oprov builds pure-Python sdists only; pin a version of %s that has wheels, or drop it", name, version, file, name)
}
