package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/oprov/oprov/internal/hcldiag"
	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// LockFileName is the dependency lock file OpenTofu and Terraform keep beside the configuration.
const LockFileName = ".terraform.lock.hcl"

// LockEntry is one provider block of a lock file.
type LockEntry = tofufiles.LockEntry

// Lock is the lock file beside a configuration (tofufiles.Lock: entries oprov does not set are
// written back byte for byte).
type Lock struct {
	Path string
	*tofufiles.Lock
}

// ReadLock reads dir/.terraform.lock.hcl; a missing file is an empty lock.
func ReadLock(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockFileName)
	src, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return &Lock{Path: path, Lock: tofufiles.NewLock()}, nil
	}
	if err != nil {
		return nil, err
	}
	l, diags := tofufiles.ParseLock(path, src)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%w (fix or delete the lock file)", hcldiag.Error(diags))
	}
	return &Lock{Path: path, Lock: l}, nil
}

// Write saves the lock atomically, if anything was set.
func (l *Lock) Write() error {
	if !l.Changed() {
		return nil
	}
	return scratch.WriteFileAtomic(l.Path, func(w io.Writer) error { _, err := w.Write(l.Bytes()); return err })
}
