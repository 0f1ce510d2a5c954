// Package layers holds the test that keeps oprov's packages depending downward only, as
// docs/architecture.md states the layers: cmd -> loader -> pkg/* (and internal/*) -> manifest.
package layers

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/oprov/oprov"

// layer gives the layer of one of the module's packages (higher depends on lower), or -1 for
// packages outside the rule (the end-to-end tests and their helpers).
func layer(pkg string) int {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "manifest":
		return 0
	case "pkg", "internal":
		return 1
	case "loader":
		return 2
	case "cmd":
		return 3
	}
	return -1
}

var layerNames = []string{"manifest", "pkg/* and internal/*", "loader", "cmd"}

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
	for pkg, deps := range graph {
		from := layer(pkg)
		if from < 0 {
			continue
		}
		for _, dep := range deps {
			if to := layer(dep); to > from {
				t.Errorf("%s (layer %s) imports %s (layer %s): packages depend downward only, cmd -> loader -> pkg/* -> manifest; move what both need down a layer",
					pkg, layerNames[from], dep, layerNames[to])
			}
			if strings.HasPrefix(dep, module+"/tests/") || strings.HasPrefix(dep, module+"/examples/") {
				t.Errorf("%s imports %s, which only the tests may use", pkg, dep)
			}
		}
	}
}
