package module

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/pkg/modulepkg"
)

// errUpgrade marks a module call the lock no longer covers: its source or constraints changed.
var errUpgrade = errors.New("the module lock no longer meets the module call")

// ErrLockMismatch marks a module whose bytes differ from what the lock records for the same
// version, commit or archive.
var ErrLockMismatch = errors.New("does not match the module lock")

// entry is the lock's entry for a call, when the lock judges it (not upgrading). A call whose
// source changed since it was locked fails, asking for -upgrade.
func (w *walker) entry(r *Resolved) (*LockEntry, error) {
	if w.opts.Lock == nil || w.opts.Upgrade {
		return nil, nil
	}
	e := w.opts.Lock.Entries[r.Key]
	if e == nil {
		return nil, nil
	}
	if e.Source != r.Source {
		return nil, fmt.Errorf("%s: %s: its source is now %s but %s locks %s: %w (run 'oprov lock --upgrade' to lock the new source, and review the change)",
			r.Where(), r.Call, r.Source, filepath.Base(w.opts.Lock.Path), e.Source, errUpgrade)
	}
	return e, nil
}

// resolve fetches a remote module's package, zips and hashes it, checks it against the lock, and
// gives the directory of its files: what is walked further is exactly what was hashed, and what
// will be installed. A package is written to disk once where it can be: what its origin gave
// becomes the tree once zipped, the entries the zip leaves out removed (keepAsTree); else it is
// removed and the zip unpacked. Calls of the same package share its tree.
func (w *walker) resolve(ctx context.Context, r *Resolved, src Source) (string, error) {
	e, err := w.entry(r)
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
	}
	var f *fetched             // a git or HTTP package, shared by every call of it
	ready := w.installed(r, e) // else a mirror's package, else the origin
	if !ready {
		if ready, err = w.mirror(ctx, r, e); err != nil {
			return "", err
		}
	}
	switch {
	case ready:
	case src.Kind == KindRegistry:
		f, err = w.registry(ctx, r, src, e)
	case src.Kind == KindGit:
		f, err = w.git(ctx, r, src)
	case src.Kind == kindHTTP:
		f, err = w.archive(ctx, r, src, e)
	case src.Kind == KindOCI:
		err = w.oci(ctx, r, src)
	}
	if err != nil {
		return "", err
	}
	if f != nil {
		if f.zip == nil {
			if f.zip, err = modulepkg.Zip(f.raw); err != nil {
				return fail(err)
			}
			if w.keepAsTree(f.raw) {
				f.tree = f.raw // still charged as f.held
			} else {
				os.RemoveAll(f.raw)
				w.budget.credit(f.held)
				f.held = usage{}
			}
			f.raw = ""
		}
		r.Zip = f.zip
	}
	if r.H1, r.ZH, err = modulepkg.Hashes(r.Zip); err != nil {
		return fail(err)
	}
	if err := checkLocked(r, e); err != nil {
		return "", err
	}
	w.logf("%s: %s%s (%s)", r.Call, r.Source, strings.TrimRight(" "+r.Version, " "), r.H1)
	if f != nil && f.tree != "" {
		return f.tree, nil
	}
	tree, err := w.unpackTree(ctx, r.Zip)
	if err != nil {
		return fail(err)
	}
	if f != nil {
		f.tree = tree
	}
	return tree, nil
}

// keepAsTree makes raw, a package as its origin gave it and just zipped, the tree the walk reads
// on, when it can stand for the zip: it must hold only directories and regular files (the zip
// reads through a link, the walk would not), and it loses the dot-entries the zip leaves out. It
// reports false when raw cannot be kept; what it removed is then of no matter, as raw goes.
func (w *walker) keepAsTree(raw string) bool {
	rel, err := filepath.Rel(w.tmp, raw)
	if err != nil || !filepath.IsLocal(rel) {
		return false
	}
	rel = filepath.ToSlash(rel)
	var dots []string
	plain := true
	err = fs.WalkDir(w.root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p != rel && strings.HasPrefix(d.Name(), "."):
			dots = append(dots, p)
			if d.IsDir() {
				return fs.SkipDir
			}
		case !d.IsDir() && !d.Type().IsRegular():
			plain = false
			return fs.SkipAll
		}
		return nil
	})
	if err != nil || !plain {
		return false
	}
	for _, p := range dots {
		if w.root.RemoveAll(filepath.FromSlash(p)) != nil {
			return false
		}
	}
	return true
}

// unpackTree unpacks a module zip into a fresh directory of the walk, charged to its budget.
func (w *walker) unpackTree(ctx context.Context, zip []byte) (string, error) {
	u, err := zipDeclared(zip, w.opts.Limits.MaxRatio)
	if err != nil {
		return "", err
	}
	if err := w.budget.charge("the module's files", u); err != nil {
		return "", err
	}
	name := w.newName("tree")
	if _, err := modulepkg.UnpackIn(ctx, zip, w.root, name, modulepkg.DefaultLimits); err != nil {
		w.budget.credit(u)
		return "", err
	}
	return filepath.Join(w.tmp, name), nil
}

// checkLocked refuses a module whose hashes are not those its lock entry records.
func checkLocked(r *Resolved, e *LockEntry) error {
	if e == nil {
		return nil
	}
	if e.Has(r.H1) && e.Has(r.ZH) {
		return nil
	}
	what := "its bytes changed for the same version"
	switch {
	case r.Kind == KindGit && e.Version != r.Version:
		what = fmt.Sprintf("its ref now points at commit %s, not the locked commit %s (the tag or branch was moved)", r.Version, e.Version)
	case r.Kind == KindOCI && e.Version != r.Version:
		what = fmt.Sprintf("its tag now points at %s, not the locked %s (the tag was moved)", r.Version, e.Version)
	case r.Kind == KindRegistry:
		what = fmt.Sprintf("the registry now serves other bytes for version %s", r.Version)
	case r.Kind == kindHTTP:
		what = "the archive now holds other files"
	}
	return fmt.Errorf("%s: %s: %s %w: %s; locked %s, got %s %s, so nothing was installed (if the change is expected, run 'oprov lock --upgrade' and review it)",
		r.Where(), r.Call, r.Source, ErrLockMismatch, what, strings.Join(e.Hashes, " "), r.H1, r.ZH)
}

// newName names a fresh directory in the walk's root (not created).
func (w *walker) newName(what string) string {
	w.n++
	return fmt.Sprintf("%s-%d", what, w.n)
}

// newDir is newName's path.
func (w *walker) newDir(what string) string { return filepath.Join(w.tmp, w.newName(what)) }

func (w *walker) logf(format string, args ...any) {
	if w.opts.Log != nil {
		fmt.Fprintf(w.opts.Log, format+"\n", args...)
	}
}
