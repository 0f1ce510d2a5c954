package providerrelease

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/pkghash/unzip"
)

// Artifact is one checked release package on disk.
type Artifact struct {
	Path   string
	Name   Filename
	Digest digest.Digest // sha256 of the whole zip
	Size   int64
	// Executable is the provider executable's name inside the zip.
	Executable string
	// H1 is the package's h1: lock-file hash.
	H1 string
}

// Package gives the artifact's description for the OCI format.
func (a Artifact) Package() manifest.Package {
	return manifest.Package{Platform: a.Name.Platform, Filename: a.Name.String(), Digest: a.Digest, Size: a.Size, H1: a.H1}
}

// Release is a set of packages of one provider type and version, one per platform, every one
// checked: named by the convention, holding the provider executable, and matching SHA256SUMS when
// there is one.
type Release struct {
	Type      string
	Version   string
	Artifacts []Artifact // sorted by platform
	// SumsPath is the SHA256SUMS file the packages were checked against, or "".
	SumsPath string
}

// Packages lists the release's packages for the OCI format.
func (r *Release) Packages() []manifest.Package {
	out := make([]manifest.Package, len(r.Artifacts))
	for i, a := range r.Artifacts {
		out[i] = a.Package()
	}
	return out
}

// Collect gathers and checks a release from the given paths. Each path is one of:
//   - a directory: its top-level *.zip files and its *_SHA256SUMS file (goreleaser's dist/ works);
//   - a SHA256SUMS file: the zips it lists, next to it;
//   - a zip file.
//
// Every zip is hashed whole (its digest) and by entry (its h1:). Nothing is written. It ends when
// ctx is done.
func Collect(ctx context.Context, paths []string) (*Release, error) {
	if len(paths) == 0 {
		return nil, errors.New("no release files given: name a directory of zips, some zips, or a SHA256SUMS file")
	}
	zips, sumsPath, err := gatherFiles(paths)
	if err != nil {
		return nil, err
	}
	var sums Sums
	if sumsPath != "" {
		if sums, zips, err = readSums(sumsPath, zips); err != nil {
			return nil, err
		}
	}
	sort.Strings(zips)
	rel, err := artifactsOf(zips)
	if err != nil {
		return nil, err
	}
	rel.SumsPath = sumsPath
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range rel.Artifacts {
		g.Go(func() error { return checkArtifact(ctx, &rel.Artifacts[i], sums) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return rel, nil
}

// gatherFiles sorts the named paths into zips and at most one SHA256SUMS file; a directory gives
// its zips and its SHA256SUMS.
func gatherFiles(paths []string) (zips []string, sumsPath string, err error) {
	setSums := func(p string) error {
		if sumsPath != "" && sumsPath != p {
			return fmt.Errorf("two SHA256SUMS files: %s and %s (give one)", sumsPath, p)
		}
		sumsPath = p
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, "", fmt.Errorf("release file %s: %w", p, errors.Unwrap(err))
		}
		switch {
		case st.IsDir():
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, "", err
			}
			n := 0
			for _, e := range entries {
				name := e.Name()
				switch {
				case e.Type().IsRegular() && strings.HasSuffix(name, ".zip"):
					zips = append(zips, filepath.Join(p, name))
					n++
				case e.Type().IsRegular() && strings.HasSuffix(name, "_SHA256SUMS"):
					if err := setSums(filepath.Join(p, name)); err != nil {
						return nil, "", err
					}
				}
			}
			if n == 0 {
				return nil, "", fmt.Errorf("directory %s holds no .zip files: build the release first (oprov package)", p)
			}
		case strings.HasSuffix(p, "SHA256SUMS"):
			if err := setSums(p); err != nil {
				return nil, "", err
			}
		default:
			zips = append(zips, p)
		}
	}
	return zips, sumsPath, nil
}

// readSums parses a SHA256SUMS file; when no zip was named, the zips it lists (beside it) are.
func readSums(sumsPath string, zips []string) (Sums, []string, error) {
	f, err := os.Open(sumsPath)
	if err != nil {
		return nil, nil, err
	}
	sums, err := ParseSums(f)
	f.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", sumsPath, err)
	}
	if len(zips) > 0 {
		return sums, zips, nil
	}
	dir := filepath.Dir(sumsPath)
	for name := range sums {
		if strings.HasSuffix(name, ".zip") {
			zips = append(zips, filepath.Join(dir, name))
		}
	}
	if len(zips) == 0 {
		return nil, nil, fmt.Errorf("%s lists no .zip files", sumsPath)
	}
	return sums, zips, nil
}

// artifactsOf names each zip, checking they are one provider, one version, one zip per platform.
func artifactsOf(zips []string) (*Release, error) {
	rel := &Release{}
	arts := make([]Artifact, len(zips))
	for i, z := range zips {
		name, err := ParseFilename(filepath.Base(z))
		if err != nil {
			return nil, err
		}
		arts[i] = Artifact{Path: z, Name: name}
		if i == 0 {
			rel.Type, rel.Version = name.Type, name.Version
			continue
		}
		if name.Type != rel.Type {
			return nil, fmt.Errorf("mixed provider types: %s is %q but %s is %q (push one provider at a time)",
				filepath.Base(zips[0]), rel.Type, filepath.Base(z), name.Type)
		}
		if name.Version != rel.Version {
			return nil, fmt.Errorf("mixed versions: %s is %s but %s is %s (push one version at a time)",
				filepath.Base(zips[0]), rel.Version, filepath.Base(z), name.Version)
		}
	}
	sortArtifacts(arts)
	for i := 1; i < len(arts); i++ {
		if arts[i].Name.Platform == arts[i-1].Name.Platform {
			return nil, fmt.Errorf("two zips for platform %s: %s and %s (keep one)", arts[i].Name.Platform, arts[i-1].Path, arts[i].Path)
		}
	}
	rel.Artifacts = arts
	return rel, nil
}

// checkArtifact hashes a zip once, compares the hash with SHA256SUMS, checks from the zip's
// central directory that it holds the provider executable and no unsafe paths, and computes its
// h1: hash (recorded in the index, so a lock needs no zip).
func checkArtifact(ctx context.Context, a *Artifact, sums Sums) error {
	base := filepath.Base(a.Path)
	f, err := os.Open(a.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", a.Path)
	}
	a.Size = st.Size()
	zr, err := zip.NewReader(f, a.Size)
	if err != nil {
		return fmt.Errorf("%s is not a valid zip: %w", a.Path, err)
	}
	exe, err := findExecutable(zr, a.Name)
	if err != nil {
		return fmt.Errorf("%s: %w", a.Path, err)
	}
	a.Executable = exe

	h := sha256.New()
	if _, err := io.Copy(h, iox.ContextReader(ctx, io.NewSectionReader(f, 0, a.Size))); err != nil {
		return fmt.Errorf("reading %s: %w", a.Path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	a.Digest = digest.NewDigestFromEncoded(digest.SHA256, sum)
	if a.H1, err = pkghash.ZipH1(ctx, a.Path); err != nil {
		return err
	}
	if sums != nil {
		want, ok := sums[base]
		if !ok {
			return fmt.Errorf("%s is not listed in the SHA256SUMS file: regenerate SHA256SUMS or leave the zip out", base)
		}
		if want != sum {
			return fmt.Errorf("%s does not match SHA256SUMS: the file has sha256 %s, SHA256SUMS says %s (the zip was changed or corrupted after the sums were made)", base, sum, want)
		}
	}
	return nil
}

// CheckZip checks an opened release zip as Collect checks each: it holds the provider executable
// the file name calls for, and no entry whose path could escape; it gives the executable's name.
func CheckZip(zr *zip.Reader, name Filename) (string, error) { return findExecutable(zr, name) }

// findExecutable finds the provider executable at the zip's root: a regular file whose name
// starts with terraform-provider-TYPE (ending in .exe on windows). It also refuses entries whose
// paths could escape the directory they are unpacked into.
func findExecutable(zr *zip.Reader, name Filename) (string, error) {
	prefix := ProviderPrefix + name.Type
	var found string
	for _, zf := range zr.File {
		if err := unzip.CheckEntryPath(zf.Name); err != nil {
			return "", err
		}
		if strings.Contains(zf.Name, "/") || !zf.Mode().IsRegular() {
			continue
		}
		n := zf.Name
		if n != prefix && !strings.HasPrefix(n, prefix+"_") && !strings.HasPrefix(n, prefix+".") {
			continue
		}
		if name.Platform.OS == "windows" && !strings.HasSuffix(n, ".exe") {
			continue
		}
		if found == "" {
			found = n // every later entry's path is still checked
		}
	}
	if found == "" {
		want := ExecutableName(name.Type, name.Version, name.Platform.OS)
		return "", fmt.Errorf("zip holds no provider executable: want %s (or another name starting with %s) at the zip's root", want, prefix)
	}
	return found, nil
}
