package source_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/source"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

func TestOpenLocalUnknownDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	addr := testfix.Addr(t, "example.com/acme/odd")
	src := source.OpenLocal(source.LocalDir{Addr: addr, Dir: dir, At: "oprov.hcl:7"}, &source.Env{Cache: testfix.Cache(t)})
	if src.Dir() != dir || src.ForDisplay(addr) != dir {
		t.Errorf("Dir %q, ForDisplay %q, want %q", src.Dir(), src.ForDisplay(addr), dir)
	}
	_, e1 := src.AvailableVersions(ctx, addr)
	_, e2 := src.Platforms(ctx, addr, source.Dev)
	_, e3 := src.PackageFor(ctx, addr, source.Dev, source.Host())
	for _, err := range []error{e1, e2, e3} {
		if err == nil {
			t.Fatal("a directory of no known kind gave an answer")
		}
		for _, want := range []string{"oprov.hcl:7", dir, "is not a provider source directory", "Go module", "pyproject.toml"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
}

func TestOpenLocalGoModule(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("the go toolchain is needed to build a provider kept as source")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tiny")
	testfix.GoModule(t, dir, "tiny")
	addr := testfix.Addr(t, "example.com/acme/tiny")
	c := testfix.Cache(t)
	open := func() source.LocalSource {
		return source.OpenLocal(source.LocalDir{Addr: addr, Dir: dir, At: "oprov.hcl:1"}, &source.Env{Cache: c})
	}
	src := open()
	list, err := src.AvailableVersions(ctx, addr)
	if err != nil || len(list) != 1 || list[0].String() != source.DevVersion {
		t.Errorf("versions %v %v, want only %s", list, err, source.DevVersion)
	}
	ps, err := src.Platforms(ctx, addr, source.Dev)
	if err != nil || len(ps) != 1 || ps[0] != source.Host() {
		t.Errorf("platforms %v %v, want this machine's only", ps, err)
	}
	other := manifest.Platform{OS: "plan9", Arch: "386"}
	if _, err := src.PackageFor(ctx, addr, source.Dev, other); err == nil || !strings.Contains(err.Error(), "for this machine") {
		t.Errorf("another platform: %v", err)
	}

	// Built through the cache's one door, as a download is installed.
	install := func(src source.LocalSource) (*cache.Package, *cache.Installed, string, error) {
		pkg, err := src.PackageFor(ctx, addr, source.Dev, source.Host())
		if err != nil {
			return nil, nil, "", err
		}
		in, err := c.Install(ctx, pkg, nil, nil)
		if err != nil {
			return pkg, nil, "", err
		}
		what := pkg.Detail
		if in.Built {
			what = pkg.Build.Fresh
		}
		return pkg, in, what, nil
	}
	pkg, in, what, err := install(src)
	if err != nil {
		t.Fatal(err)
	}
	if what != "source, built" || pkg.Auth.Method != "local" || pkg.Version != source.DevVersion || pkg.Fetch != nil || pkg.Build == nil {
		t.Errorf("built package %+v (%s)", pkg, what)
	}
	out, err := exec.Command(in.Executable).Output()
	if err != nil || strings.TrimSpace(string(out)) != "tiny "+source.DevVersion {
		t.Errorf("the built provider printed %q (%v)", out, err)
	}

	// The same source tree is built once.
	_, again, what, err := install(open())
	if err != nil || again.Executable != in.Executable || what != "source, cached build" {
		t.Errorf("second build: %v %+v %s", err, again, what)
	}
	// A change to it is built again, elsewhere.
	if err := os.WriteFile(filepath.Join(dir, "extra.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, changed, what, err := install(open())
	if err != nil || changed.Executable == in.Executable || what != "source, built" {
		t.Errorf("after a change: %v %+v %s", err, changed, what)
	}
	// A module that does not build says why, and leaves nothing behind.
	if err := os.WriteFile(filepath.Join(dir, "broken.go"), []byte("package main\nfunc {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := install(open()); err == nil || !strings.Contains(err.Error(), "go build") || !strings.Contains(err.Error(), addr.String()) {
		t.Errorf("a broken module: %v", err)
	}
}
