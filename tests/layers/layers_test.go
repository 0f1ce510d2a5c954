// Package layers holds the test that keeps oprov's packages in the layers docs/architecture.md
// states. The layers are in order, lowest first; a package imports only from its own layer and
// the layers below it. Anything else is an arrow running the wrong way and fails the test, and so
// does a package no layer places and a table in docs/architecture.md that says otherwise.
package layers

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/oprov/oprov"

// A layer is a set of packages, by path prefix (the most specific prefix of any layer wins).
type layer struct {
	name     string
	packages []string
}

// rules are the layers in order, lowest first: each may import itself and what is below it.
var rules = []layer{
	// The ground: primitives that know nothing of providers, registries or OpenTofu.
	{name: "ground", packages: []string{"internal"}},
	// What is on the wire and on disk: the artifact manifest, the plugin protocol's model,
	// OpenTofu's own files, package hashes and safe unpacking, the provider release format.
	{name: "formats", packages: []string{"manifest", "pkg/protocol", "pkg/tofufiles", "pkg/pkghash", "pkg/providerrelease"}},
	// Moving those formats: the registry client, referrers, credentials, artifacts and copies.
	{name: "transport", packages: []string{"pkg/oci", "pkg/tfcreds", "pkg/artifact", "pkg/artifactcopy", "pkg/modulepkg"}},
	// Making and confining executables: builders from source and the kernel sandbox.
	{name: "builders and sandbox", packages: []string{"pkg/gobuild", "pkg/pybuild", "pkg/sandbox"}},
	{name: "provider host", packages: []string{"pkg/plugin", "pkg/middleware", "pkg/stdiohost", "pkg/recording"}},
	{name: "stores and sources", packages: []string{"pkg/cache", "pkg/sign", "pkg/source", "pkg/origin", "pkg/module"}},
	{name: "services", packages: []string{"pkg/publish", "pkg/mirror", "pkg/bundle", "pkg/serve"}},
	{name: "loader", packages: []string{"loader"}},
	{name: "cli", packages: []string{"cmd"}},
	// Test fixtures import the whole stack to build what tests need; nothing else may import them.
	{name: "test fixtures", packages: []string{"tests", "examples"}},
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

func rank(name string) int {
	for i, l := range rules {
		if l.name == name {
			return i
		}
	}
	return -1
}

// mayImport: a layer imports its own packages and those of the layers below it.
func mayImport(from, to string) bool {
	f, t := rank(from), rank(to)
	return f >= 0 && t >= 0 && t <= f
}

// violations lists every import in graph that its layer's rule does not allow, and every package
// no rule places.
func violations(graph map[string][]string) []string {
	var out []string
	for pkg, deps := range graph {
		from := layerOf(pkg)
		if from == "" {
			out = append(out, pkg+" is in no layer: give it one in tests/layers and docs/architecture.md")
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
		module + "/pkg/cache":             {module + "/pkg/bundle"},            // store -> service
		module + "/pkg/oci":               {module + "/pkg/sign"},              // transport -> store
		module + "/internal/iox":          {module + "/manifest"},              // ground -> format
		module + "/pkg/pkghash":           {module + "/pkg/oci"},               // format -> transport
		module + "/pkg/sandbox":           {module + "/pkg/plugin"},            // sandbox -> provider host
		module + "/pkg/serve":             {module + "/loader"},                // service -> loader
		module + "/internal/scratch":      {module + "/tests/testkit/testfix"}, // into the fixtures
		module + "/pkg/newthing":          nil,                                 // placed nowhere
		module + "/loader":                {module + "/cmd/oprov"},             // loader -> cli
		module + "/tests/testkit/testfix": {module + "/pkg/cache"},             // allowed
		module + "/pkg/bundle":            {module + "/pkg/mirror"},            // allowed: same layer
		module + "/pkg/artifact":          {module + "/internal/scratch"},      // allowed: down to the ground
	}
	got := violations(bad)
	if len(got) != 9 {
		t.Fatalf("want 9 violations, got %d:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, v := range got {
		for _, ok := range []string{"/tests/testkit/testfix ", "/pkg/bundle ", "/pkg/artifact "} {
			if strings.HasPrefix(v, module+ok) {
				t.Errorf("allowed import reported: %s", v)
			}
		}
	}
}

// TestArchitectureTableIsTheRules: the layers table in docs/architecture.md names the same layers,
// in the same order, with the same packages, as rules does.
func TestArchitectureTableIsTheRules(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	got := layersTable(string(doc))
	var want []string
	for _, l := range rules {
		want = append(want, l.name+": "+strings.Join(l.packages, " "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("docs/architecture.md's layers table says\n%s\nthe rules in tests/layers say\n%s",
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

var pathInTicks = regexp.MustCompile("`([a-z][a-z0-9/]*)/?`")

// layersTable reads the table under "## Layers": each row's layer name and the packages its
// second column names in backticks, in order.
func layersTable(doc string) []string {
	i := strings.Index(doc, "\n## Layers")
	if i < 0 {
		return nil
	}
	var rows []string
	for _, line := range strings.Split(doc[i+1:], "\n")[1:] {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| ") || len(cells) < 4 || cells[1] == " layer " {
			continue
		}
		var pkgs []string
		for _, m := range pathInTicks.FindAllStringSubmatch(cells[2], -1) {
			pkgs = append(pkgs, m[1])
		}
		rows = append(rows, strings.TrimSpace(cells[1])+": "+strings.Join(pkgs, " "))
	}
	return rows
}
