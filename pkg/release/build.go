package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/modfile"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/scratch"
)

// DefaultPlatforms are the platforms `oprov package --go` builds when none are named.
var DefaultPlatforms = []manifest.Platform{
	{OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"},
	{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"},
	{OS: "windows", Arch: "amd64"}, {OS: "windows", Arch: "arm64"},
}

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
}

func (o *PackageOptions) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// Packaged is the result of packaging: the release, and each package's lock-file hashes.
type Packaged struct {
	Release *Release
	Hashes  map[manifest.Platform]Hashes
}

// PackageGo cross-compiles the Go provider in dir for each platform (CGO_ENABLED=0, -trimpath)
// and writes its release zips and SHA256SUMS into opts.OutDir.
func PackageGo(ctx context.Context, dir string, opts PackageOptions) (*Packaged, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, errors.New("the go toolchain is not on PATH: install Go, or build the executables yourself and use --bin")
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("%s is not a Go module (no go.mod): %w", dir, errors.Unwrap(err))
	}
	if opts.Type == "" {
		abs, _ := filepath.Abs(dir)
		if t, ok := TypeFromName(filepath.Base(abs)); ok {
			opts.Type = t
		} else if t, ok := TypeFromName(modfile.ModulePath(gomod)); ok {
			opts.Type = t
		} else {
			return nil, fmt.Errorf("cannot tell the provider type: neither the directory %q nor the module %q is named terraform-provider-TYPE (pass --name TYPE)", filepath.Base(abs), modfile.ModulePath(gomod))
		}
	}
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	work, err := scratch.Beside(os.TempDir())
	if err != nil {
		return nil, err
	}
	defer work.Release()
	tmp := work.Path

	var files []platformFiles
	for _, p := range opts.Platforms {
		exe := filepath.Join(tmp, p.String(), ExecutableName(opts.Type, opts.Version, p.OS))
		opts.progress("building %s for %s", opts.Type, p.Slash())
		if err := BuildGo(ctx, dir, p, opts.Version, exe); err != nil {
			if opts.BuildOutput != nil {
				io.WriteString(opts.BuildOutput, err.Error())
			}
			return nil, err
		}
		files = append(files, platformFiles{platform: p, exe: exe})
	}
	return writeRelease(opts, files)
}

// PackageBinaries packages already-built executables laid out as binDir/OS_ARCH/, one directory
// per platform. In each, the executable is the file whose name starts with terraform-provider-
// (or the only file there); other regular files (LICENSE, README) go into the zip beside it.
func PackageBinaries(binDir string, opts PackageOptions) (*Packaged, error) {
	if opts.Type == "" {
		return nil, errors.New("--bin needs --name TYPE: the provider type cannot be read from executables")
	}
	if err := opts.check(); err != nil {
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
	var files []platformFiles
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
	return writeRelease(opts, files)
}

type platformFiles struct {
	platform manifest.Platform
	exe      string   // path of the executable
	extra    []string // paths of other files
	tree     string   // a directory whose files go in too, by their path below it
}

func readBinDir(dir string, p manifest.Platform) (platformFiles, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return platformFiles{}, err
	}
	pf := platformFiles{platform: p}
	var regular []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return platformFiles{}, fmt.Errorf("%s: %s is not a regular file (only files go into a package)", dir, e.Name())
		}
		regular = append(regular, e.Name())
		if strings.HasPrefix(e.Name(), providerPrefix) {
			if pf.exe != "" {
				return platformFiles{}, fmt.Errorf("%s holds two executables (%s and %s): keep one", dir, filepath.Base(pf.exe), e.Name())
			}
			pf.exe = filepath.Join(dir, e.Name())
		}
	}
	if pf.exe == "" && len(regular) == 1 {
		pf.exe = filepath.Join(dir, regular[0])
	}
	if pf.exe == "" {
		return platformFiles{}, fmt.Errorf("%s: no executable named terraform-provider-*", dir)
	}
	for _, n := range regular {
		if p := filepath.Join(dir, n); p != pf.exe {
			pf.extra = append(pf.extra, p)
		}
	}
	return pf, nil
}

func (o *PackageOptions) check() error {
	if err := ValidateType(o.Type); err != nil {
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

// writeRelease zips each platform's files into OutDir, hashing each zip as it is written, then
// writes SHA256SUMS. Every file is written under a temporary name and renamed into place.
func writeRelease(opts PackageOptions, files []platformFiles) (*Packaged, error) {
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	out := &Packaged{
		Release: &Release{Type: opts.Type, Version: opts.Version},
		Hashes:  map[manifest.Platform]Hashes{},
	}
	sums := Sums{}
	for _, pf := range files {
		name := Filename{Type: opts.Type, Version: opts.Version, Platform: pf.platform}
		exeName := ExecutableName(opts.Type, opts.Version, pf.platform.OS)
		zfs := []ZipFile{{Name: exeName, Executable: true, Open: opener(pf.exe)}}
		for _, x := range pf.extra {
			zfs = append(zfs, ZipFile{Name: filepath.Base(x), Open: opener(x)})
		}
		if pf.tree != "" {
			tree, err := treeFiles(pf.tree)
			if err != nil {
				return nil, err
			}
			zfs = append(zfs, tree...)
		}
		dest := filepath.Join(opts.OutDir, name.String())
		opts.progress("writing %s", name)
		var size int64
		var sum string
		err := WriteFileAtomic(dest, func(w io.Writer) error {
			h := sha256.New()
			cw := &CountingWriter{W: io.MultiWriter(w, h)}
			if err := WriteZip(cw, zfs); err != nil {
				return err
			}
			size, sum = cw.N, hex.EncodeToString(h.Sum(nil))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", dest, err)
		}
		h1, err := HashZipH1(dest)
		if err != nil {
			return nil, err
		}
		sums[name.String()] = sum
		out.Hashes[pf.platform] = Hashes{ZH: ZH(sum), H1: h1}
		out.Release.Artifacts = append(out.Release.Artifacts, Artifact{
			Path: dest, Name: name, Digest: digest.NewDigestFromEncoded(digest.SHA256, sum), Size: size, Executable: exeName, H1: h1,
		})
	}
	sortArtifacts(out.Release.Artifacts)
	sumsPath := filepath.Join(opts.OutDir, SumsName(opts.Type, opts.Version))
	if err := WriteFileAtomic(sumsPath, func(w io.Writer) error { _, err := w.Write(sums.Bytes()); return err }); err != nil {
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

// CountingWriter counts the bytes written through it.
type CountingWriter struct {
	W io.Writer
	N int64
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}

// WriteFileAtomic writes a file under a temporary name in an owned temporary directory beside it
// (see pkg/scratch), syncs it, and renames it into place, so the file is either whole or absent,
// and what a killed writer left beside it is removed by the next write there.
func WriteFileAtomic(dest string, write func(io.Writer) error) error {
	return scratch.WriteFileAtomic(dest, write)
}

// BuildGo cross-compiles the Go module in dir for one platform into out, the way releases are
// built: CGO_ENABLED=0, -trimpath, no VCS stamping, and -X main.version=VERSION.
func BuildGo(ctx context.Context, dir string, p manifest.Platform, version, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version="+version, "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOFLAGS=")
	var buf strings.Builder
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s for %s failed: %v\n%s", dir, p.Slash(), err, strings.TrimSpace(buf.String()))
	}
	return nil
}
