// Package traversal feeds every writer that takes a name from outside (a zip's entries, a
// provider's address, version and platform, a registry's tags, a bundle's repositories) hostile
// names, and checks that each is refused with an error and that nothing lands outside the
// directory it writes under: the grammar checks where names enter are the first line, writes
// through os.Root the second, so a name that slips past the first (or a symbolic link planted in
// the target beforehand) still cannot leave.
package traversal

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifactcopy"
	"github.com/oprov/oprov/pkg/bundle"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash/unzip"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

// marker ends every hostile name, so whatever a writer made of one can be found.
const marker = "pwned"

// scene is one attempt: base holds the writer's target and, beside it, outside, a directory the
// writer must never reach. Nothing outside the target may be written; outside stays empty.
type scene struct {
	base, target, outside string
}

func newScene(t *testing.T) *scene {
	t.Helper()
	base := t.TempDir()
	s := &scene{base: base, target: filepath.Join(base, "target"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{s.target, s.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// hostile gives the names each writer is fed, as a function of the scene: what must leave the
// target if a writer took it as a path.
func hostile(s *scene) map[string]string {
	climb := strings.Repeat("../", 40) // past the file system's root, whatever the depth
	return map[string]string{
		"dot-dot":            "..",
		"parent":             "../" + marker,
		"climb to outside":   climb + strings.TrimPrefix(filepath.ToSlash(s.outside), "/") + "/" + marker,
		"absolute":           filepath.ToSlash(s.outside) + "/" + marker,
		"NUL":                "a\x00" + marker,
		"backslash":          `..\` + marker,
		"separator in names": "a/../../" + marker,
	}
}

// check asserts the writer refused and nothing named after the marker exists anywhere under
// base outside the target, and outside is empty.
func (s *scene) check(t *testing.T, err error) {
	t.Helper()
	s.checkRefused(t, err, true)
}

// checkRefused is check, with the refusal itself asserted only when mustRefuse is set.
func (s *scene) checkRefused(t *testing.T, err error, mustRefuse bool) {
	t.Helper()
	if err == nil && mustRefuse {
		t.Errorf("accepted; want a refusal")
	} else if err != nil {
		t.Logf("refused: %v", err)
	}
	entries, _ := os.ReadDir(s.outside)
	for _, e := range entries {
		t.Errorf("written outside the target: %s", filepath.Join(s.outside, e.Name()))
	}
	filepath.WalkDir(s.base, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), marker) && !strings.HasPrefix(p, s.target+string(os.PathSeparator)) {
			t.Errorf("written outside the target: %s", p)
		}
		return nil
	})
	if _, err := os.Stat("/" + marker); err == nil {
		t.Errorf("written at /%s", marker)
	}
}

// plantLink makes target/rel a symbolic link to outside: a parent directory that would lead a
// path-based write out of the target.
func (s *scene) plantLink(t *testing.T, rel string) {
	t.Helper()
	p := filepath.Join(s.target, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.outside, p); err != nil {
		t.Fatal(err)
	}
}

// rawZip is a zip holding one file under name, written without any check of the name.
func rawZip(t *testing.T, name string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "escaped")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeZip(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.zip")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writer is one place oprov writes under names from outside.
type writer struct {
	name string
	// rootOnly marks a second line (a write through os.Root for a caller that checked nothing):
	// a name that stays inside the target is its caller's to refuse, so only the names that
	// would leave must be refused.
	rootOnly bool
	// write feeds the writer one hostile name, writing under s.target.
	write func(t *testing.T, s *scene, name string) error
}

// providerZip is a well-formed provider package, so that only the hostile name is wrong.
func providerZip(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create("terraform-provider-hello_v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "#!/bin/sh\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// installWith installs a good zip as a package whose address, version or platform has been set
// to a hostile name without going through their parsers (a caller that forgot).
func installWith(t *testing.T, s *scene, set func(*cache.Package)) error {
	t.Helper()
	c, err := cache.Open(s.target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := providerZip(t)
	pkg := &cache.Package{Addr: testfix.Addr(t, "example.com/acme/hello"), Version: "1.0.0", Platform: manifest.Platform{OS: "linux", Arch: "amd64"},
		Filename: "terraform-provider-hello_1.0.0_linux_amd64.zip", Zip: digest.FromBytes(data), Size: int64(len(data)),
		Fetch: func(_ context.Context, w io.Writer, _ oci.Progress) error { _, err := w.Write(data); return err }}
	set(pkg)
	_, err = c.Install(context.Background(), pkg, nil, nil)
	return err
}

func writeMeta(t *testing.T, s *scene, repo, tag string) error {
	t.Helper()
	c, err := cache.Open(s.target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.WriteMeta(oci.Ref{Registry: "registry.example", Repository: repo}, &cache.VersionMeta{Repository: repo, Tag: tag, Version: "1.0.0"})
}

// linkWith links a package installed under a mirror root into a configuration's provider
// directory, its version set to name.
func linkWith(t *testing.T, s *scene, version string) error {
	t.Helper()
	t.Setenv("TF_DATA_DIR", "")
	mirror := filepath.Join(t.TempDir(), "mirror")
	platform := testfix.Host().String()
	in := loader.Installed{Addr: "example.com/acme/hello", Version: version, Platform: platform, MirrorRoot: mirror,
		Dir: filepath.Join(mirror, "example.com", "acme", "hello", version, platform)}
	errs := (&loader.Project{Dir: s.target}).LinkProviders(&loader.InstallResult{Installed: []loader.Installed{in}})
	return errors.Join(errs...)
}

var writers = []writer{
	{"unzip.ExtractIn: a zip entry's name", false, func(t *testing.T, s *scene, name string) error {
		root, err := os.OpenRoot(s.target)
		if err != nil {
			return err
		}
		defer root.Close()
		return unzip.ExtractIn(context.Background(), writeZip(t, rawZip(t, name)), root, "pkg", unzip.DefaultLimits, nil)
	}},
	{"modulepkg.Unpack: a module zip entry's name", false, func(t *testing.T, s *scene, name string) error {
		return modulepkg.Unpack(rawZip(t, name), filepath.Join(s.target, "module"))
	}},
	{"cache.Install: a provider's version", false, func(t *testing.T, s *scene, name string) error {
		return installWith(t, s, func(p *cache.Package) { p.Version = name })
	}},
	{"cache.Install: a provider's namespace", false, func(t *testing.T, s *scene, name string) error {
		return installWith(t, s, func(p *cache.Package) { p.Addr.Namespace = name })
	}},
	{"cache.Install: a platform's OS", false, func(t *testing.T, s *scene, name string) error {
		return installWith(t, s, func(p *cache.Package) { p.Platform.OS = name })
	}},
	{"unzip.ExtractIn: the destination (a caller that checked nothing)", true, func(t *testing.T, s *scene, name string) error {
		root, err := os.OpenRoot(s.target)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		return unzip.ExtractIn(context.Background(), writeZip(t, providerZip(t)), root, filepath.Join("pkg", name, marker), unzip.DefaultLimits, nil)
	}},
	{"scratch.Dir.WriteFileIn: the file's name (a caller that checked nothing)", true, func(t *testing.T, s *scene, name string) error {
		d, err := scratch.Claim(s.target)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Release()
		root, err := os.OpenRoot(s.target)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		return d.WriteFileIn(root, filepath.Join("sub", name), func(w io.Writer) error { _, err := io.WriteString(w, "escaped"); return err })
	}},
	{"loader.LinkProviders: a package's version", false, func(t *testing.T, s *scene, name string) error {
		return linkWith(t, s, name)
	}},
	{"cache.WriteMeta: a version's tag", false, func(t *testing.T, s *scene, name string) error {
		return writeMeta(t, s, "acme/hello", name)
	}},
	{"cache.WriteMeta: a repository", false, func(t *testing.T, s *scene, name string) error {
		return writeMeta(t, s, name, "1.0.0")
	}},
}

func TestHostileNamesAreRefusedByEveryWriter(t *testing.T) {
	for _, w := range writers {
		for what := range hostile(newScene(t)) {
			t.Run(w.name+"/"+what, func(t *testing.T) {
				s := newScene(t)
				s.checkRefused(t, w.write(t, s, hostile(s)[what]), !w.rootOnly || what == "climb to outside")
			})
		}
	}
}

// TestSymlinkedParentsAreNotFollowedOut plants, inside the target, a directory that is a
// symbolic link to outside, where a writer's well-formed names lead: a lexical check of the names
// passes, and only a write that resolves each component inside the target is refused.
func TestSymlinkedParentsAreNotFollowedOut(t *testing.T) {
	t.Run("cache.WriteMeta: a registry's directory", func(t *testing.T) {
		s := newScene(t)
		s.plantLink(t, "versions/registry.example")
		s.check(t, writeMeta(t, s, "acme/"+marker, "1.0.0"))
	})
	t.Run("unzip.ExtractIn: the destination's parent", func(t *testing.T) {
		s := newScene(t)
		s.plantLink(t, "pkg")
		root, err := os.OpenRoot(s.target)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		s.check(t, unzip.ExtractIn(context.Background(), writeZip(t, providerZip(t)), root, filepath.Join("pkg", marker), unzip.DefaultLimits, nil))
	})
	t.Run("loader.LinkProviders: a host's directory", func(t *testing.T) {
		s := newScene(t)
		s.plantLink(t, ".terraform/providers/example.com")
		s.check(t, linkWith(t, s, "1.0.0"))
	})
	t.Run("cache.Install: the mirror directory", func(t *testing.T) {
		s := newScene(t)
		s.plantLink(t, "mirror")
		s.check(t, installWith(t, s, func(*cache.Package) {}))
	})
	t.Run("bundle.Load: a repository's layout", func(t *testing.T) {
		s := newScene(t)
		src := filepath.Join(t.TempDir(), marker)
		testfix.Layout(t, src).Push(t, testfix.NewRelease(t, "hello", "1.0.0", testfix.Host()))
		ctx := context.Background()
		item, err := bundle.SaveItemFor(ctx, oci.Ref{Layout: src}, oci.NewClient(oci.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		tarball := filepath.Join(t.TempDir(), "b.tar")
		if _, err := bundle.Save(ctx, []bundle.SaveItem{item}, tarball, artifactcopy.Options{}); err != nil {
			t.Fatal(err)
		}
		b, err := bundle.Open(ctx, tarball, oci.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		s.plantLink(t, marker)
		_, err = bundle.Load(ctx, b, bundle.LoadOptions{To: "oci-layout:" + s.target})
		s.check(t, err)
	})
}
