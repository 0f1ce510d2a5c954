package module

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// Limits bound what a walk fetches: remote peers are not ours.
type Limits struct {
	MaxDepth   int   // module calls nested below the root (default 16)
	MaxModules int   // remote modules in all (default 500)
	MaxPackage int64 // bytes of one package: downloaded, and unpacked (default 256 MiB)
	MaxFiles   int   // files in one package (default 20000)
	// MaxBytes and MaxTotalFiles bound the module files a walk holds on disk at once, across
	// every package: archives as unpacked, git checkouts, module trees (default 4 GiB and
	// 200000 files). Each package is held once: what its origin gave becomes its tree once zipped.
	MaxBytes      int64
	MaxTotalFiles int
	// MaxRatio bounds how many times a compressed archive may expand: a zip entry, or a gzip
	// stream as a whole, past its first MiB (default 200).
	MaxRatio int64
	// MaxCalls bounds the module calls a walk follows in all, local and remote, counted by call
	// path (default 10000): local modules that call one another many times over multiply.
	MaxCalls int
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = 16
	}
	if l.MaxModules <= 0 {
		l.MaxModules = 500
	}
	if l.MaxPackage <= 0 {
		l.MaxPackage = 256 << 20
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = 20000
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 4 << 30
	}
	if l.MaxTotalFiles <= 0 {
		l.MaxTotalFiles = 200000
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = 200
	}
	if l.MaxCalls <= 0 {
		l.MaxCalls = 10000
	}
	return l
}

// Options say how to resolve a configuration's modules.
type Options struct {
	// Lock, when set, judges every module: a locked call is fetched at its locked version and
	// refused when its hashes differ; a call whose source or constraints the lock no longer
	// meets fails (asking for Upgrade). Walk does not change it (see Lock.Record).
	Lock *Lock
	// Upgrade resolves every call afresh, the lock notwithstanding.
	Upgrade bool
	// HTTP fetches registry answers and archives; nil means a client with TLS from CAFile.
	HTTP   *http.Client
	CAFile string
	// Services maps a registry hostname to its modules.v1 base URL, overriding service discovery
	// (the CLI configuration's host blocks).
	Services map[string]string
	// Registry is the registry client oci:// modules are fetched through; OCI, when set, opens
	// their repositories instead (tests).
	Registry *oci.Client
	OCI      func(ctx context.Context, ref oci.Ref) (oci.ReadOnly, error)
	// Policies are the trust policies an oci:// module is verified under: the first with a rule
	// for its repository. None: oci:// modules are used unverified (with a warning in Log).
	Policies []*sign.Policy
	// Mirror, when set, is asked first for each remote module: a module package (modulepkg) that
	// stands in for its origin, as a bundle loaded into an internal registry does. It gives the
	// repository and reference of the package, or ok false to fetch from the origin. The package
	// is verified under Policies like an oci:// module and judged by the lock like the origin's.
	Mirror func(ctx context.Context, r *Resolved, locked *LockEntry) (t oci.ReadOnly, ref oci.Ref, ok bool, err error)
	// Installed, when set, is a working directory whose .terraform/modules may already hold the
	// modules: a module recorded there with the same source, whose files hash to what its lock
	// entry records, is taken from there without a request.
	Installed string
	// Git is the git program (default "git").
	Git    string
	Limits Limits
	// Progress hears the bytes of archives and module zips as they download.
	Progress oci.Progress
	// Log hears a line per module fetched.
	Log io.Writer
}

// Walk resolves every module call of the configuration in dir, recursively: remote modules are
// fetched (at the version the lock pins, unless upgrading), zipped and hashed, and checked against
// the lock; local ones are read as part of their caller. It returns every remote module and the
// required_providers of every module. Nothing is written outside a temporary directory, which is
// gone when Walk returns.
func Walk(ctx context.Context, dir string, opts Options) (*Tree, error) {
	t, _, err := walk(ctx, dir, opts)
	return t, err
}

// walk is Walk, also giving what the walk charged to its budget in all (the tests' measure of
// how often a package was written).
func walk(ctx context.Context, dir string, opts Options) (*Tree, usage, error) {
	tmp, err := os.MkdirTemp("", "oprov-modules-")
	if err != nil {
		return nil, usage{}, err
	}
	defer os.RemoveAll(tmp)
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, usage{}, err
	}
	defer root.Close()
	w := &walker{opts: opts, tmp: tmp, root: root, tree: &Tree{Requirements: map[string]*Requirement{}}}
	w.opts.Limits = opts.Limits.withDefaults()
	w.budget = budget{maxBytes: w.opts.Limits.MaxBytes, maxFiles: w.opts.Limits.MaxTotalFiles}
	if w.opts.Git == "" {
		w.opts.Git = "git"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, usage{}, err
	}
	if err := w.module(ctx, &frame{dir: abs, pkgRoot: abs, shown: dir}); err != nil {
		return nil, usage{}, err
	}
	return w.tree, w.budget.written, nil
}

// Local reads the module in dir and the modules it calls by local paths, fetching nothing: their
// required_providers, and how many remote module calls they make.
func Local(dir string) (map[string]*Requirement, int, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, 0, err
	}
	w := &walker{tree: &Tree{Requirements: map[string]*Requirement{}}, localOnly: true}
	w.opts.Limits = Limits{}.withDefaults()
	if err := w.module(context.Background(), &frame{dir: abs, pkgRoot: abs, shown: dir}); err != nil {
		return nil, 0, err
	}
	return w.tree.Requirements, w.remote, nil
}

// fetched is a git or HTTP package fetched in this walk: at first the directory its origin gave
// (raw), and once it is zipped only its zip and the tree the walk reads (raw kept, or the zip
// unpacked; never changed after).
type fetched struct {
	raw     string
	held    usage // what raw, or the tree kept from it, holds on disk
	zip     []byte
	tree    string
	version string
	origin  string
}

type walker struct {
	opts   Options
	tmp    string
	root   *os.Root // tmp: every unpack goes through it
	budget budget
	tree   *Tree
	n      int // packages fetched, for their temporary directories
	// localOnly follows local calls only (Local), counting the remote ones.
	localOnly bool
	remote    int
	manifest  map[string]manifestRecord // Installed's modules.json, once read
	bases     map[string]*url.URL       // registry hosts' modules.v1, discovered once a walk
	fetched   map[string]*fetched       // git and HTTP packages by address, fetched once a walk
	// parsed holds each module directory read, by path (a package's directory is its own), so
	// that a local module called many times is read once.
	parsed map[string]*parsed
	// settled are the local modules whose calls, followed to the end, were all local and met no
	// cycle, by owner, directory and depth: following them again adds nothing, so they are not.
	settled map[settledKey]bool
	calls   int // calls followed, against MaxCalls
	effects int // calls that were not local, and cycles cut: what a settled module has none of
}

type settledKey struct {
	owner *Resolved
	dir   string
	depth int
}

// frame is one module being read: its directory, the package it is in (local calls may not
// leave it), its call path, and the remote module that owns it (nil: the root's own package).
type frame struct {
	dir, pkgRoot string
	shown        string   // dir as messages name it
	path         []string // call names from the root
	owner        *Resolved
	dirs         []string // directories of the local modules on the way here (cycles)
	sources      []string // remote sources on the way here (cycles)
}

func (f *frame) callPath(name string) (call, key string) {
	names := append(append([]string{}, f.path...), name)
	return "module." + strings.Join(names, ".module."), strings.Join(names, ".")
}

// module reads one module directory and follows its calls.
func (w *walker) module(ctx context.Context, f *frame) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := w.parsed[f.dir]
	if p == nil {
		var err error
		if p, err = parseDir(f.dir, f.shown); err != nil {
			return err
		}
		if w.parsed == nil {
			w.parsed = map[string]*parsed{}
		}
		w.parsed[f.dir] = p
	}
	merge(w.tree.Requirements, p.Requires)
	if f.owner != nil {
		merge(f.owner.Requires, p.Requires)
	}
	for _, c := range p.Calls {
		if err := w.call(ctx, f, c); err != nil {
			return err
		}
	}
	return nil
}

// call follows one module call.
func (w *walker) call(ctx context.Context, f *frame, c call) error {
	callName, key := f.callPath(c.Name)
	if w.calls++; w.calls > w.opts.Limits.MaxCalls {
		return &oci.LimitError{
			What:    fmt.Sprintf("%s: %s: the configuration makes more than %d module calls (local modules that call one another many times over?)", where(c.Range), callName, w.opts.Limits.MaxCalls),
			Limit:   fmt.Sprintf("the %s of %d", SettingMaxModuleCalls, w.opts.Limits.MaxCalls),
			Setting: SettingMaxModuleCalls,
		}
	}
	if src, err := ParseSource(c.Source); c.Unreadable != nil || err != nil || src.Kind != KindLocal {
		w.effects++
	}
	if c.Unreadable != nil {
		if w.localOnly {
			w.remote++ // what it calls is known only to a walk
			return nil
		}
		// OpenTofu evaluates such sources itself (static variables): the module is left to
		// tofu init, unlocked, its providers not counted, and the log says so.
		w.logf("warning: %v; %s is left to tofu init: not locked, and the providers it requires are not counted", c.Unreadable, callName)
		return nil
	}
	if len(f.path)+1 > w.opts.Limits.MaxDepth {
		return fmt.Errorf("%s: %s: modules nest deeper than %d calls (a cycle?)", where(c.Range), callName, w.opts.Limits.MaxDepth)
	}
	src, err := ParseSource(c.Source)
	if errors.Is(err, errOtherGetter) {
		if w.localOnly {
			w.remote++
		} else {
			w.logf("warning: %s: %s: %v; it is left to tofu init: not locked, and the providers it requires are not counted", where(c.Range), callName, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", where(c.Range), callName, err)
	}
	if src.Kind == KindLocal {
		return w.local(ctx, f, c, src, callName)
	}
	if w.localOnly {
		w.remote++
		return nil
	}
	full := src.String()
	for _, s := range f.sources {
		if s == full {
			return fmt.Errorf("%s: %s calls %s, which is already among its callers: a cycle", where(c.Range), callName, full)
		}
	}
	if len(w.tree.Modules) >= w.opts.Limits.MaxModules {
		return fmt.Errorf("%s: %s: more than %d remote modules in the configuration", where(c.Range), callName, w.opts.Limits.MaxModules)
	}
	r := &Resolved{Call: callName, Key: key, Source: full, Kind: src.Kind, Subdir: src.Subdir,
		Constraints: c.Version, Range: c.Range, Requires: map[string]*Requirement{}}
	pkgDir, err := w.resolve(ctx, r, src)
	if err != nil {
		return err
	}
	w.tree.Modules = append(w.tree.Modules, r)
	next := &frame{dir: filepath.Join(pkgDir, filepath.FromSlash(r.Subdir)), pkgRoot: pkgDir,
		shown: filepath.Join(filepath.FromSlash(ModulesDir), r.Key, filepath.FromSlash(r.Subdir)),
		path:  append(append([]string{}, f.path...), c.Name), owner: r,
		sources: append(append([]string{}, f.sources...), full)}
	if fi, err := os.Stat(next.dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: %s: %s has no directory %q", where(c.Range), callName, full, r.Subdir)
	}
	return w.module(ctx, next)
}

// local follows a call by a local path: the module is part of its caller's package.
func (w *walker) local(ctx context.Context, f *frame, c call, src Source, callName string) error {
	if c.Version != "" {
		return fmt.Errorf("%s: %s: a module called by a local path takes no version argument", where(c.Range), callName)
	}
	dir := filepath.Join(f.dir, filepath.FromSlash(src.Local))
	if f.owner != nil {
		rel, err := filepath.Rel(f.pkgRoot, dir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s: %s: %q leads outside the package of %s", where(c.Range), callName, src.Local, f.owner.Source)
		}
	}
	for _, d := range append(f.dirs, f.dir) {
		if d == dir {
			w.effects++
			return nil // already among its callers: read once (a local cycle adds nothing)
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: %s: the module directory %s is not there", where(c.Range), callName, dir)
	}
	// A module whose calls are all local, met again at the same depth for the same owner, has
	// given its providers already and calls nothing that needs an entry of its own.
	k := settledKey{owner: f.owner, dir: dir, depth: len(f.path) + 1}
	if w.settled[k] {
		return nil
	}
	next := &frame{dir: dir, pkgRoot: f.pkgRoot, shown: filepath.Join(f.shown, filepath.FromSlash(src.Local)),
		path:  append(append([]string{}, f.path...), c.Name),
		owner: f.owner, dirs: append(append([]string{}, f.dirs...), f.dir), sources: f.sources}
	before := w.effects
	if err := w.module(ctx, next); err != nil {
		return err
	}
	if w.effects == before {
		if w.settled == nil {
			w.settled = map[settledKey]bool{}
		}
		w.settled[k] = true
	}
	return nil
}
