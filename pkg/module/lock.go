package module

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/oprov/oprov/internal/hcldiag"
	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// LockFileName is the module lock, beside .terraform.lock.hcl. It is a file of its own because
// OpenTofu (v1.12) reads module blocks in .terraform.lock.hcl only to warn that module locks are
// not supported yet, and drops them whenever it rewrites that file (every tofu init that touches
// a provider). Its blocks are already in the format OpenTofu's draft RFC gives for
// .terraform.lock.hcl, so that they can be moved there once OpenTofu reads them.
const LockFileName = ".terraform.modules.lock.hcl"

// LockEntry is one module block of the lock (the label is the call's key: vpc, vpc.nested).
type LockEntry = tofufiles.ModuleLockEntry

// Lock is the module lock beside a configuration.
type Lock struct {
	Path string
	*tofufiles.ModuleLock
	src []byte // as read; Write does nothing when the rendering is the same
}

// ReadLock reads dir's module lock; a missing file is an empty lock.
func ReadLock(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFileName)
	src, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return &Lock{Path: path, ModuleLock: &tofufiles.ModuleLock{Entries: map[string]*LockEntry{}}}, nil
	}
	if err != nil {
		return nil, err
	}
	l, diags := tofufiles.ParseModuleLock(path, src)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%w (fix the module lock, or delete it and run 'oprov lock')", hcldiag.Error(diags))
	}
	for key := range l.Entries {
		if err := checkKey(key); err != nil {
			return nil, fmt.Errorf("%s: %w (the lock was not written by oprov from a valid configuration: delete the entry, or the file, and run 'oprov lock')", path, err)
		}
	}
	return &Lock{Path: path, ModuleLock: l, src: src}, nil
}

// Record makes the lock hold exactly the tree's modules: one entry each (its source, version,
// constraints and h1:/zh: hashes); entries of calls no longer in the configuration go.
func (l *Lock) Record(t *Tree) {
	entries := map[string]*LockEntry{}
	for _, r := range t.Modules {
		entries[r.Key] = &LockEntry{Call: r.Key, Source: r.Source, Version: r.Version,
			Constraints: r.Constraints, Hashes: []string{r.H1, r.ZH}}
	}
	l.Entries = entries
}

// Write saves the lock atomically when its text changed; an empty lock that has no file stays
// without one.
func (l *Lock) Write() error {
	out := l.Bytes()
	if bytes.Equal(out, l.src) || (l.src == nil && len(l.Entries) == 0) {
		return nil
	}
	if err := scratch.WriteFileAtomic(l.Path, func(w io.Writer) error { _, err := w.Write(out); return err }); err != nil {
		return err
	}
	l.src = out
	return nil
}
