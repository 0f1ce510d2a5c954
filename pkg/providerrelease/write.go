package providerrelease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/pkghash"
)

// PackageOptions says what to package and where.
type PackageOptions struct {
	Version   string
	Type      string // empty: taken from the directory or module name terraform-provider-TYPE
	Platforms []manifest.Platform
	OutDir    string
	// Progress, when set, is told about each step.
	Progress func(format string, args ...any)
	// BuildOutput receives the go toolchain's own output.
	BuildOutput io.Writer
	// Steps, when set, is told as each platform's build (the long, otherwise silent part)
	// starts and ends.
	Steps Steps
}

// Steps hears pieces of work start and end (internal/progress.Steps shows them).
type Steps interface {
	Start(step string)
	Done(step string, err error)
}

// Progressf tells o.Progress about a step, when it is set.
func (o *PackageOptions) Progressf(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// StepStart tells o.Steps that a step has started, when it is set.
func (o *PackageOptions) StepStart(step string) {
	if o.Steps != nil {
		o.Steps.Start(step)
	}
}

// StepDone tells o.Steps that a step has ended (err when it failed), when it is set.
func (o *PackageOptions) StepDone(step string, err error) {
	if o.Steps != nil {
		o.Steps.Done(step, err)
	}
}

// Packaged is the result of packaging: the release, and each package's lock-file hashes.
type Packaged struct {
	Release *Release
	Hashes  map[manifest.Platform]pkghash.Hashes
}

// PackageBinaries packages already-built executables laid out as binDir/OS_ARCH/, one directory
// per platform. In each, the executable is the file whose name starts with terraform-provider-
// (or the only file there); other regular files (LICENSE, README) go into the zip beside it.
func PackageBinaries(binDir string, opts PackageOptions) (*Packaged, error) {
	if opts.Type == "" {
		return nil, errors.New("--bin needs --name TYPE: the provider type cannot be read from executables")
	}
	if err := opts.Check(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(binDir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", binDir, err)
	}
	want := map[manifest.Platform]bool{}
	for _, p := range opts.Platforms {
		want[p] = true
	}
	var files []PlatformFiles
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p, err := manifest.ParsePlatform(e.Name())
		if err != nil {
			return nil, fmt.Errorf("%s: directory %q is not named OS_ARCH (the --bin layout is DIR/OS_ARCH/terraform-provider-TYPE...)", binDir, e.Name())
		}
		if len(want) > 0 && !want[p] {
			continue
		}
		pf, err := readBinDir(filepath.Join(binDir, e.Name()), p)
		if err != nil {
			return nil, err
		}
		files = append(files, pf)
		delete(want, p)
	}
	for p := range want {
		return nil, fmt.Errorf("%s has no %s directory for platform %s", binDir, p, p.Slash())
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no OS_ARCH directories (the --bin layout is DIR/OS_ARCH/terraform-provider-TYPE...)", binDir)
	}
	return Write(opts, files)
}

// PlatformFiles are the files that go into one platform's package.
type PlatformFiles struct {
	Platform manifest.Platform
	Exe      string   // path of the executable
	Extra    []string // paths of other files
	Tree     string   // a directory whose files go in too, by their path below it
}

func readBinDir(dir string, p manifest.Platform) (PlatformFiles, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return PlatformFiles{}, err
	}
	pf := PlatformFiles{Platform: p}
	var regular []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return PlatformFiles{}, fmt.Errorf("%s: %s is not a regular file (only files go into a package)", dir, e.Name())
		}
		regular = append(regular, e.Name())
		if strings.HasPrefix(e.Name(), ProviderPrefix) {
			if pf.Exe != "" {
				return PlatformFiles{}, fmt.Errorf("%s holds two executables (%s and %s): keep one", dir, filepath.Base(pf.Exe), e.Name())
			}
			pf.Exe = filepath.Join(dir, e.Name())
		}
	}
	if pf.Exe == "" && len(regular) == 1 {
		pf.Exe = filepath.Join(dir, regular[0])
	}
	if pf.Exe == "" {
		return PlatformFiles{}, fmt.Errorf("%s: no executable named terraform-provider-*", dir)
	}
	for _, n := range regular {
		if p := filepath.Join(dir, n); p != pf.Exe {
			pf.Extra = append(pf.Extra, p)
		}
	}
	return pf, nil
}

// Check checks the options before anything is built: a valid type and version, an output
// directory, and no platform twice.
func (o *PackageOptions) Check() error {
	if err := validateType(o.Type); err != nil {
		return err
	}
	if _, err := manifest.ParseVersion(o.Version); err != nil {
		return err
	}
	if o.OutDir == "" {
		return errors.New("no output directory given (-o DIR)")
	}
	seen := map[manifest.Platform]bool{}
	for _, p := range o.Platforms {
		if seen[p] {
			return fmt.Errorf("platform %s is named twice", p.Slash())
		}
		seen[p] = true
	}
	return nil
}

// Write zips each platform's files into opts.OutDir, hashing each zip as it is written, then
// writes SHA256SUMS. Every file is written under a temporary name and renamed into place.
func Write(opts PackageOptions, files []PlatformFiles) (*Packaged, error) {
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	out := &Packaged{
		Release: &Release{Type: opts.Type, Version: opts.Version},
		Hashes:  map[manifest.Platform]pkghash.Hashes{},
	}
	sums := Sums{}
	for _, pf := range files {
		name := Filename{Type: opts.Type, Version: opts.Version, Platform: pf.Platform}
		exeName := ExecutableName(opts.Type, opts.Version, pf.Platform.OS)
		zfs := []ZipFile{{Name: exeName, Executable: true, Open: opener(pf.Exe)}}
		for _, x := range pf.Extra {
			zfs = append(zfs, ZipFile{Name: filepath.Base(x), Open: opener(x)})
		}
		if pf.Tree != "" {
			tree, err := treeFiles(pf.Tree)
			if err != nil {
				return nil, err
			}
			zfs = append(zfs, tree...)
		}
		dest := filepath.Join(opts.OutDir, name.String())
		opts.Progressf("writing %s", name)
		var size int64
		var sum string
		err := scratch.WriteFileAtomic(dest, func(w io.Writer) error {
			h := sha256.New()
			cw := &iox.CountingWriter{W: io.MultiWriter(w, h)}
			if err := WriteZip(cw, zfs); err != nil {
				return err
			}
			size, sum = cw.N, hex.EncodeToString(h.Sum(nil))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", dest, err)
		}
		h1, err := pkghash.ZipH1(context.Background(), dest)
		if err != nil {
			return nil, err
		}
		sums[name.String()] = sum
		out.Hashes[pf.Platform] = pkghash.Hashes{ZH: pkghash.ZH(sum), H1: h1}
		out.Release.Artifacts = append(out.Release.Artifacts, Artifact{
			Path: dest, Name: name, Digest: digest.NewDigestFromEncoded(digest.SHA256, sum), Size: size, Executable: exeName, H1: h1,
		})
	}
	sortArtifacts(out.Release.Artifacts)
	sumsPath := filepath.Join(opts.OutDir, SumsName(opts.Type, opts.Version))
	if err := scratch.WriteFileAtomic(sumsPath, func(w io.Writer) error { _, err := w.Write(sums.Bytes()); return err }); err != nil {
		return nil, err
	}
	out.Release.SumsPath = sumsPath
	return out, nil
}

func sortArtifacts(a []Artifact) {
	sort.SliceStable(a, func(i, j int) bool { return a[i].Name.Platform.Less(a[j].Name.Platform) })
}

func opener(path string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return os.Open(path) }
}

// treeFiles lists a directory's regular files as zip entries (mode 0644) named by their path
// below root.
func treeFiles(root string) ([]ZipFile, error) {
	var out []ZipFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (only files go into a package)", p)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		// Modes are not carried: Python needs none, and umasks differ between machines.
		out = append(out, ZipFile{Name: filepath.ToSlash(rel), Open: func() (io.ReadCloser, error) { return os.Open(p) }})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("packaging %s: %w", root, err)
	}
	return out, nil
}
