package layers

import (
	"go/types"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// exempt are the packages whose exported names need no user inside the module: commands (no
// importer), the test fixtures and end-to-end tests, the examples (their own modules' users), and
// the generated protocol bindings.
func exempt(path string) bool {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	for _, p := range []string{"cmd", "tests", "examples", "pkg/plugin/tfplugin5", "pkg/plugin/tfplugin6"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// TestExportedNamesHaveUsers: every exported package-level function, variable and constant of
// ours is used by some other package of the module, its tests included, or it should not be
// exported. Types, methods and fields are left out: values of a type, and an interface a method
// satisfies, use them where no name does.
func TestExportedNamesHaveUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and type-checks the whole module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo, Tests: true, Dir: "../.."}
	pkgs, err := packages.Load(cfg, module+"/...")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	declared := map[string][]types.Object{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("%s: %v", p.PkgPath, p.Errors)
		}
		if !strings.HasPrefix(p.PkgPath, module) {
			continue
		}
		if !strings.HasSuffix(p.ID, ".test]") && !strings.HasSuffix(p.PkgPath, "_test") && !strings.HasSuffix(p.ID, ".test") {
			scope := p.Types.Scope()
			for _, name := range scope.Names() {
				if obj := scope.Lookup(name); obj.Exported() && !isType(obj) {
					declared[p.PkgPath] = append(declared[p.PkgPath], obj)
				}
			}
		}
		home := p.PkgPath // an external test package (x_test) is a user like any other
		for _, obj := range p.TypesInfo.Uses {
			if obj.Pkg() != nil && obj.Pkg().Path() != home && obj.Parent() == obj.Pkg().Scope() {
				used[key(obj)] = true
			}
		}
	}
	var unused []string
	for path, objs := range declared {
		if exempt(path) {
			continue
		}
		for _, obj := range objs {
			if !used[key(obj)] {
				unused = append(unused, strings.TrimPrefix(path, module+"/")+"."+obj.Name())
			}
		}
	}
	sort.Strings(unused)
	for _, u := range unused {
		t.Errorf("%s is exported but no other package uses it: unexport it, or remove it", u)
	}
}

// key names a package-level object the same in every variant of its package (the package as
// built for its tests has objects of its own).
func key(obj types.Object) string { return obj.Pkg().Path() + "." + obj.Name() }

// isType reports whether obj names a type: a type is used wherever values of it are, which a
// name count does not see, so types are judged by the functions that make and take them.
func isType(obj types.Object) bool { _, ok := obj.(*types.TypeName); return ok }
