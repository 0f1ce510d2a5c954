// Package layers holds the test that keeps oprov's packages in the layers docs/architecture.md
// states. Each layer has a rule: the layers it may import from. A package imports only from
// layers its rule names; anything else is an arrow running the wrong way and fails the test.
package layers

import (
	"bufio"
	"bytes"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/oprov/oprov"

// A layer is a set of packages (by path prefix, most specific first) and the layers its packages
// may import. Lower layers come first.
type layer struct {
	name     string
	packages []string
	may      []string // the layers this one may import, its own included where it is
}

var rules = []layer{
	{name: "format", packages: []string{"manifest", "pkg/protocol"},
		may: nil},
	{name: "primitives", packages: []string{
		"internal/iox", "internal/signals", "internal/progress", "internal/hcldiag",
		"internal/bindelta", "internal/tofufiles", "internal/tfcreds",
		"internal/scratch", "internal/unzip", "internal/doccheck", "internal/build",
		"internal/referrers", "internal/ocicopy", "internal/layers",
		"pkg/pkghash", "pkg/release", "pkg/oci", "pkg/artifact", "pkg/sandbox", "pkg/modulepkg"},
		may: []string{"format", "primitives"}},
	{name: "provider host", packages: []string{"pkg/plugin", "pkg/middleware", "pkg/stdiohost", "pkg/recording"},
		may: []string{"format", "primitives", "provider host"}},
	{name: "stores and sources", packages: []string{"pkg/cache", "pkg/sign", "pkg/source", "pkg/origin", "pkg/module"},
		may: []string{"format", "primitives", "provider host", "stores and sources"}},
	{name: "services", packages: []string{"pkg/publish", "pkg/mirror", "pkg/bundle", "pkg/serve"},
		may: []string{"format", "primitives", "provider host", "stores and sources", "services"}},
	{name: "loader", packages: []string{"loader"},
		may: []string{"format", "primitives", "provider host", "stores and sources", "services", "loader"}},
	{name: "cli", packages: []string{"cmd"},
		may: []string{"format", "primitives", "provider host", "stores and sources", "services", "loader"}},
	// Test fixtures import the whole stack to build what tests need; nothing else may import them.
	{name: "test fixtures", packages: []string{"internal/testing", "tests", "examples"},
		may: []string{"format", "primitives", "provider host", "stores and sources", "services", "loader", "cli", "test fixtures"}},
}

// layerOf names the layer of one of the module's packages, or "" when no rule covers it.
func layerOf(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	best, bestLen := "", -1
	for _, l := range rules {
		for _, p := range l.packages {
			if (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > bestLen {
				best, bestLen = l.name, len(p)
			}
		}
	}
	return best
}

func mayImport(from, to string) bool {
	for _, l := range rules {
		if l.name == from {
			for _, m := range l.may {
				if m == to {
					return true
				}
			}
		}
	}
	return false
}

// violations lists every import in graph that its layer's rule does not allow, and every package
// no rule places.
func violations(graph map[string][]string) []string {
	var out []string
	for pkg, deps := range graph {
		from := layerOf(pkg)
		if from == "" {
			out = append(out, pkg+" is in no layer: give it one in internal/layers and docs/architecture.md")
			continue
		}
		for _, dep := range deps {
			to := layerOf(dep)
			if to == "" || !mayImport(from, to) {
				out = append(out, pkg+" ("+from+") imports "+dep+" ("+to+"): the "+from+
					" layer may not; move what both need down a layer")
			}
		}
	}
	sort.Strings(out)
	return out
}

// imports lists each of the module's packages with the module's packages it imports, as go list
// sees them (test files excluded: a test may reach up to drive what it tests).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		graph[fields[0]] = nil
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module+"/") {
				graph[fields[0]] = append(graph[fields[0]], imp)
			}
		}
	}
	return graph
}

func TestPackagesDependDownward(t *testing.T) {
	graph := imports(t)
	if len(graph) < 10 {
		t.Fatalf("go list found only %d packages: %v", len(graph), graph)
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// TestRulesCatchUpwardImports shows the rule failing on imports that run the wrong way.
func TestRulesCatchUpwardImports(t *testing.T) {
	bad := map[string][]string{
		module + "/pkg/cache":                {module + "/pkg/bundle"},               // store -> service
		module + "/pkg/oci":                  {module + "/pkg/sign"},                 // primitive -> store
		module + "/manifest":                 {module + "/internal/iox"},             // format -> primitive
		module + "/pkg/serve":                {module + "/loader"},                   // service -> loader
		module + "/internal/iox":             {module + "/internal/testing/testfix"}, // into the fixtures
		module + "/pkg/newthing":             nil,                                    // placed nowhere
		module + "/loader":                   {module + "/cmd/oprov"},                // loader -> cli
		module + "/internal/testing/testfix": {module + "/pkg/cache"},                // allowed
		module + "/pkg/bundle":               {module + "/pkg/mirror"},               // allowed: same layer
	}
	got := violations(bad)
	if len(got) != 7 {
		t.Fatalf("want 7 violations, got %d:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, v := range got {
		if strings.HasPrefix(v, module+"/internal/testing/testfix ") || strings.HasPrefix(v, module+"/pkg/bundle ") {
			t.Errorf("allowed import reported: %s", v)
		}
	}
}
