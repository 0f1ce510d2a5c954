package module

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/pkg/modulepkg"
)

// ModulesDir is where OpenTofu and Terraform keep installed modules, below the working directory.
const ModulesDir = ".terraform/modules"

// manifestRecord is one record of .terraform/modules/modules.json, as OpenTofu and Terraform
// write it: the call's key, its source address, the registry version, the module's directory.
type manifestRecord struct {
	Key     string `json:"Key"`
	Source  string `json:"Source"`
	Version string `json:"Version,omitempty"`
	Dir     string `json:"Dir"`
}

// Install writes every module of the tree into dir/.terraform/modules/KEY (each package unpacked
// from its zip, the one that was hashed and checked against the lock) and writes modules.json so
// that tofu init and terraform init keep them: a record per module with the source address the
// configuration gives and, for registry modules, the version, which meets the call's constraints.
// Each package is unpacked beside its place first, then swapped in; modules.json is written last,
// atomically. Directories of keys the tree no longer has are left to tofu init, which removes
// them. Every write, rename and removal goes through an os.Root at .terraform/modules (itself
// opened through one at dir): a key that is no call path, or a symbolic link on the way, cannot
// make it touch anything outside.
func Install(ctx context.Context, dir string, t *Tree) error {
	for _, r := range t.Modules {
		if err := checkKey(r.Key); err != nil {
			return fmt.Errorf("%s: %s: %w; nothing was installed", r.Where(), r.Call, err)
		}
	}
	mods, err := openModulesDir(dir)
	if err != nil {
		return err
	}
	defer mods.Close()
	staging := ".oprov-staging-" + strings.ToLower(rand.Text())
	if err := mods.Mkdir(staging, 0o700); err != nil {
		return err
	}
	defer mods.RemoveAll(staging)
	records := []manifestRecord{{Key: "", Source: "", Dir: "."}}
	for _, r := range t.Modules {
		if _, err := modulepkg.UnpackIn(ctx, r.Zip, mods, filepath.Join(staging, r.Key), modulepkg.DefaultLimits); err != nil {
			return fmt.Errorf("%s: %s: unpacking into %s: %w", r.Where(), r.Call, path.Join(ModulesDir, r.Key), err)
		}
		rec := manifestRecord{Key: r.Key, Source: r.Source, Dir: path.Join(ModulesDir, r.Key, r.Subdir)}
		if r.Kind == KindRegistry {
			rec.Version = r.Version
		}
		records = append(records, rec)
	}
	for _, r := range t.Modules {
		if err := mods.RemoveAll(r.Key); err != nil {
			return err
		}
		if err := mods.Rename(filepath.Join(staging, r.Key), r.Key); err != nil {
			return err
		}
	}
	data, err := json.Marshal(struct {
		Modules []manifestRecord `json:"Modules"`
	}{records})
	if err != nil {
		return err
	}
	return writeFileIn(mods, "modules.json", data)
}

// openModulesDir makes and opens dir/.terraform/modules as an os.Root, through one at dir: a
// .terraform or modules that is a link out of the configuration directory is refused.
func openModulesDir(dir string) (*os.Root, error) {
	top, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	rel := filepath.FromSlash(ModulesDir)
	if err := top.MkdirAll(rel, 0o755); err != nil {
		return nil, fmt.Errorf("making %s: %w", filepath.Join(dir, rel), err)
	}
	mods, err := top.OpenRoot(rel)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", filepath.Join(dir, rel), err)
	}
	return mods, nil
}

// writeFileIn writes name in root atomically: a temporary file beside it, synced, renamed over it.
func writeFileIn(root *os.Root, name string, data []byte) error {
	if err := modulepkg.CheckName(name); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".tmp-"+strings.ToLower(rand.Text()))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
