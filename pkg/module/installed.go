package module

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/pkg/modulepkg"
)

// maxManifest bounds modules.json as oprov reads it.
const maxManifest = 16 << 20

// readManifest reads dir/.terraform/modules/modules.json's records by key; none when it is
// missing or unreadable (then every module is fetched).
func readManifest(workDir string) map[string]manifestRecord {
	p := filepath.Join(workDir, filepath.FromSlash(ModulesDir), "modules.json")
	fi, err := os.Stat(p)
	if err != nil || fi.Size() > maxManifest {
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var mj struct{ Modules []manifestRecord }
	if json.Unmarshal(data, &mj) != nil {
		return nil
	}
	out := map[string]manifestRecord{}
	for _, r := range mj.Modules {
		if checkKey(r.Key) == nil { // the root's record ("") and any key no call can have are left out
			out[r.Key] = r
		}
	}
	return out
}

// installed takes a module from its installed copy (Options.Installed) when modules.json records
// it with the same source and the copy's hashes are exactly those its lock entry records: what
// the lock vouches for needs no network. Anything else is fetched.
func (w *walker) installed(r *Resolved, e *LockEntry) bool {
	if e == nil || w.opts.Installed == "" {
		return false
	}
	if w.manifest == nil {
		w.manifest = readManifest(w.opts.Installed)
		if w.manifest == nil {
			w.manifest = map[string]manifestRecord{}
		}
	}
	rec, ok := w.manifest[r.Key]
	prefix := path.Join(ModulesDir, r.Key)
	if !ok || rec.Source != r.Source || (rec.Dir != prefix && !strings.HasPrefix(rec.Dir, prefix+"/")) {
		return false
	}
	zip, err := modulepkg.Zip(filepath.Join(w.opts.Installed, filepath.FromSlash(prefix)))
	if err != nil {
		return false
	}
	h1, zh, err := modulepkg.Hashes(zip)
	if err != nil || !e.Has(h1) || !e.Has(zh) {
		return false
	}
	sub, err := cleanSubdir(strings.TrimPrefix(strings.TrimPrefix(rec.Dir, prefix), "/"))
	if err != nil {
		return false
	}
	r.Zip, r.Version, r.Subdir, r.FromInstalled = zip, e.Version, sub, true
	w.logf("%s: %s %s, installed and matching the lock", r.Call, r.Source, r.Version)
	return true
}
