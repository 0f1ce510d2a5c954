package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// The kinds of cache entries.
const (
	kindZip      = "zip"      // blobs/sha256/<hex>
	kindVersion  = "version"  // versions/<registry>/<repository>/<tag>.json
	kindUnpacked = "unpacked" // mirror/<key>/
	kindBuild    = "build"    // builds/<key>/
	kindEvidence = "evidence" // evidence/: manifests and signature artifacts, and where they were
)

// Entry is one thing the cache holds. Its size is the bytes of its files; its last use is its
// modification time, which the cache moves forward whenever the entry is used (markUsed).
type Entry struct {
	Kind     string    `json:"kind"`
	Name     string    `json:"name"` // sha256:<hex>, REGISTRY/REPOSITORY:TAG, HOST/NS/TYPE VERSION OS_ARCH, or the build's executable
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	LastUsed time.Time `json:"last_used"`

	zips      []digest.Digest // kindVersion: the zips the record lists
	zipPrefix string          // kindUnpacked: the start of the hex digest of the zip it came from
	lockName  string          // the Lock a writer of this entry takes, if any
}

// Inventory is what the cache holds: its entries (whose sizes add up to Size) and the temporary
// space beside them.
type Inventory struct {
	Dir     string  `json:"dir"`
	Size    int64   `json:"size"`
	Entries []Entry `json:"entries"`
	Temp    Temp    `json:"temp"`
}

// Temp is the cache's temporary space: directories of runs in progress (live) or of runs that are
// gone (not live: the next Open removes them), and unowned files left by an older oprov.
type Temp struct {
	Size    int64           `json:"size"`
	Owners  []scratch.Owner `json:"owners"`
	Unowned []scratch.Owner `json:"unowned"`
	// Cleared is what opening the cache just removed of runs that are gone.
	Cleared scratch.Swept `json:"cleared"`
}

// List describes every entry of the cache and its temporary space. This Cache's own (empty)
// temporary directory is left out.
func (c *Cache) List() (*Inventory, error) {
	inv := &Inventory{Dir: c.Dir, Entries: []Entry{}}
	for _, list := range []func() ([]Entry, error){c.listZips, c.listVersions, c.listUnpacked, c.listBuilds, c.listEvidence} {
		es, err := list()
		if err != nil {
			return nil, err
		}
		inv.Entries = append(inv.Entries, es...)
	}
	for _, e := range inv.Entries {
		inv.Size += e.Size
	}
	inv.Temp = c.tempReport()
	return inv, nil
}

func (c *Cache) tempReport() Temp {
	root := filepath.Join(c.Dir, "tmp")
	t := Temp{Owners: []scratch.Owner{}, Unowned: []scratch.Owner{}, Cleared: c.swept}
	own := c.ownTmp()
	for _, o := range scratch.List(root) {
		if o.Path != own {
			t.Owners = append(t.Owners, o)
			t.Size += o.Size
		}
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if scratch.IsOwned(e.Name()) {
			continue
		}
		o := scratch.Owner{Path: filepath.Join(root, e.Name())}
		o.Size, o.Files = scratch.Usage(o.Path)
		if info, err := e.Info(); err == nil {
			o.Since = info.ModTime()
		}
		t.Unowned = append(t.Unowned, o)
		t.Size += o.Size
	}
	return t
}

// entryAt describes the file or directory at path as an entry.
func entryAt(kind, name, path string) (Entry, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Entry{}, err
	}
	size, _ := scratch.Usage(path)
	return Entry{Kind: kind, Name: name, Path: path, Size: size, LastUsed: st.ModTime()}, nil
}

// readDir lists a directory of the cache; a missing one is empty.
func readDir(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	return entries, err
}

func (c *Cache) listZips() ([]Entry, error) {
	dir := filepath.Join(c.Dir, "blobs", "sha256")
	names, err := readDir(dir)
	var out []Entry
	for _, n := range names {
		e, err := entryAt(kindZip, "sha256:"+n.Name(), filepath.Join(dir, n.Name()))
		if err != nil {
			continue // removed since the listing
		}
		e.lockName = "blob-" + n.Name()
		out = append(out, e)
	}
	return out, err
}

func (c *Cache) listVersions() ([]Entry, error) {
	var out []Entry
	root := filepath.Join(c.Dir, "versions")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		e, err := entryAt(kindVersion, filepath.ToSlash(rel), p)
		if err != nil {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil {
			var m VersionMeta
			if json.Unmarshal(data, &m) == nil && m.Repository != "" {
				e.Name = m.Repository + ":" + m.Tag
				for _, pm := range m.Platforms {
					e.zips = append(e.zips, pm.Zip)
				}
			}
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

func (c *Cache) listUnpacked() ([]Entry, error) {
	dir := filepath.Join(c.Dir, "mirror")
	names, err := readDir(dir)
	var out []Entry
	for _, n := range names {
		root := filepath.Join(dir, n.Name())
		name := n.Name()
		if pkg, ok := unpackedPackage(root); ok {
			rel, _ := filepath.Rel(root, pkg)
			parts := strings.Split(filepath.ToSlash(rel), "/") // HOST NS TYPE VERSION OS_ARCH
			name = strings.Join(parts[:3], "/") + " " + parts[3] + " " + parts[4]
		}
		e, err := entryAt(kindUnpacked, name, root)
		if err != nil {
			continue
		}
		e.zipPrefix, _, _ = strings.Cut(n.Name(), "-")
		e.lockName = "mirror-" + n.Name()
		out = append(out, e)
	}
	return out, err
}

// unpackedPackage finds the one package directory ROOT/HOST/NS/TYPE/VERSION/OS_ARCH of an
// unpacked entry.
func unpackedPackage(root string) (string, bool) {
	pkgs, _ := filepath.Glob(filepath.Join(root, "*", "*", "*", "*", "*"))
	if len(pkgs) != 1 {
		return "", false
	}
	st, err := os.Stat(pkgs[0])
	return pkgs[0], err == nil && st.IsDir()
}

func (c *Cache) listBuilds() ([]Entry, error) {
	dir := filepath.Join(c.Dir, "builds")
	names, err := readDir(dir)
	var out []Entry
	for _, n := range names {
		root := filepath.Join(dir, n.Name())
		name := n.Name()
		if exes, _ := filepath.Glob(filepath.Join(root, "terraform-provider-*")); len(exes) == 1 {
			name = filepath.Base(exes[0]) + " (" + n.Name()[:min(12, len(n.Name()))] + ")"
		}
		e, err := entryAt(kindBuild, name, root)
		if err != nil {
			continue
		}
		e.lockName = "build-" + n.Name()
		out = append(out, e)
	}
	return out, err
}

// sumsFile records the sha256 of each file of a build, for Verify.
const sumsFile = "SHA256SUMS"

// sealDir records the sha256 of every file directly in dir (a build about to be renamed into the
// cache) in dir/SHA256SUMS, so that Verify can check it later.
func sealDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	sums := providerrelease.Sums{}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == sumsFile {
			continue
		}
		sum, err := sha256File(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		sums[e.Name()] = sum
	}
	return os.WriteFile(filepath.Join(dir, sumsFile), sums.Bytes(), 0o644)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// listEvidence lists the evidence as one entry: it is small, and judged as a whole.
func (c *Cache) listEvidence() ([]Entry, error) {
	e, err := entryAt(kindEvidence, "manifests and signature artifacts", filepath.Join(c.Dir, "evidence"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []Entry{e}, nil
}
