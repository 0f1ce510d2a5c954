package pybuild

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// commonDir is the directory, beside lib/cpXY, that holds what every claimed CPython version's
// set has byte for byte the same (pure-Python packages, abi3 wheels): stored once, it is put on
// sys.path after the version's own set.
const commonDir = "common"

// shareCommon moves each top-level entry of lib/cpXY (a package, a module, a .dist-info) that is
// identical in every version's set into lib/common, once, and removes it from the sets. A package
// whose files differ anywhere (a compiled extension built per version) stays whole in each set:
// Python does not merge one regular package from two sys.path entries.
func shareCommon(lib string, versions []string) error {
	if len(versions) < 2 {
		return nil
	}
	first := filepath.Join(lib, cpTag(versions[0]))
	entries, err := os.ReadDir(first)
	if err != nil {
		return err
	}
	var shared []string
	for _, e := range entries {
		same := true
		for _, v := range versions[1:] {
			eq, err := sameTree(filepath.Join(first, e.Name()), filepath.Join(lib, cpTag(v), e.Name()))
			if err != nil {
				return err
			}
			if !eq {
				same = false
				break
			}
		}
		if same {
			shared = append(shared, e.Name())
		}
	}
	if len(shared) == 0 {
		return nil
	}
	common := filepath.Join(lib, commonDir)
	if err := os.MkdirAll(common, 0o755); err != nil {
		return err
	}
	for _, name := range shared {
		if err := os.Rename(filepath.Join(first, name), filepath.Join(common, name)); err != nil {
			return err
		}
		for _, v := range versions[1:] {
			if err := os.RemoveAll(filepath.Join(lib, cpTag(v), name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// sameTree reports whether a and b hold the same paths, of the same kinds and modes, with the same
// bytes. A missing b is not the same.
func sameTree(a, b string) (bool, error) {
	la, err := treeListing(a)
	if err != nil {
		return false, err
	}
	lb, err := treeListing(b)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(la) != len(lb) {
		return false, nil
	}
	for i := range la {
		if la[i] != lb[i] {
			return false, nil
		}
		if la[i].mode.IsRegular() {
			da, err := os.ReadFile(filepath.Join(a, la[i].rel))
			if err != nil {
				return false, err
			}
			db, err := os.ReadFile(filepath.Join(b, lb[i].rel))
			if err != nil {
				return false, err
			}
			if !bytes.Equal(da, db) {
				return false, nil
			}
		}
	}
	return true, nil
}

type treeEntry struct {
	rel  string
	mode fs.FileMode
	size int64
}

// treeListing lists root (a file or a directory) by relative path, sorted.
func treeListing(root string) ([]treeEntry, error) {
	var out []treeEntry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		size := info.Size()
		if d.IsDir() {
			size = 0
		}
		out = append(out, treeEntry{rel, info.Mode(), size})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, err
}
