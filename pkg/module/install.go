package module

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/oprov/oprov/internal/scratch"
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
// them.
func Install(ctx context.Context, dir string, t *Tree) error {
	mods := filepath.Join(dir, filepath.FromSlash(ModulesDir))
	if err := os.MkdirAll(mods, 0o755); err != nil {
		return err
	}
	staging, err := os.MkdirTemp(mods, ".oprov-staging-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	records := []manifestRecord{{Key: "", Source: "", Dir: "."}}
	for _, r := range t.Modules {
		if err := modulepkg.UnpackContext(ctx, r.Zip, filepath.Join(staging, r.Key)); err != nil {
			return fmt.Errorf("%s: %s: %w", r.Where(), r.Call, err)
		}
		rec := manifestRecord{Key: r.Key, Source: r.Source, Dir: path.Join(ModulesDir, r.Key, r.Subdir)}
		if r.Kind == KindRegistry {
			rec.Version = r.Version
		}
		records = append(records, rec)
	}
	for _, r := range t.Modules {
		final := filepath.Join(mods, r.Key)
		if err := os.RemoveAll(final); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(staging, r.Key), final); err != nil {
			return err
		}
	}
	data, err := json.Marshal(struct {
		Modules []manifestRecord `json:"Modules"`
	}{records})
	if err != nil {
		return err
	}
	return scratch.WriteFileAtomic(filepath.Join(mods, "modules.json"), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
