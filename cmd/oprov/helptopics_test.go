package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestRootHelpGrouped: 'oprov --help' lists the commands by job, its summary names what a
// newcomer comes for, it links the documentation, and every path its examples name exists.
func TestRootHelpGrouped(t *testing.T) {
	stdout, _, code := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("oprov --help: exit %d", code)
	}
	for _, want := range []string{"Publish providers:", "Configure and run (beside your .tf files):", "Serve and air gap:", "Other:",
		"'oprov init'", "'oprov run'", "'oprov serve'", "air gap", docsURL, "oprov help environment"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("oprov --help does not say %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "Available Commands:") {
		t.Errorf("oprov --help has an ungrouped command list:\n%s", stdout)
	}
	root := newRootCmd(&IOStreams{})
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && c.GroupID == "" {
			t.Errorf("command %s is in no group of oprov --help", c.Name())
		}
	}
	_, examples, _ := strings.Cut(stdout, "\nExamples:\n")
	for _, p := range regexp.MustCompile(`\./[\w./-]+`).FindAllString(examples, -1) {
		if _, err := os.Stat(filepath.Join("../..", p)); err != nil {
			t.Errorf("oprov --help's example names %s, which is not in the repository", p)
		}
	}
}

// TestEnvironmentHelpComplete fails when oprov's code reads an OPROV_* variable that 'oprov help
// environment' does not list. It reads every Go file of the module but tests and test fixtures,
// and takes every string literal's OPROV_* names (a Getenv argument, a constant, a launcher
// script's $OPROV).
func TestEnvironmentHelpComplete(t *testing.T) {
	stdout, _, code := runCLI(t, "help", "environment")
	if code != 0 || !strings.Contains(stdout, "OPROV_CACHE_DIR") {
		t.Fatalf("oprov help environment: exit %d: %s", code, stdout)
	}
	used := oprovVariables(t, "../..")
	if len(used) < 10 {
		t.Fatalf("found only %d OPROV_* variables in the code; the scan is broken", len(used))
	}
	listed := regexp.MustCompile(`\bOPROV(_[A-Z0-9_]*[A-Z0-9])?\b`)
	documented := map[string]bool{}
	for _, v := range listed.FindAllString(stdout, -1) {
		documented[v] = true
	}
	var missing []string
	for v, where := range used {
		if !documented[v] {
			missing = append(missing, v+" (read in "+where+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("oprov reads %s, but 'oprov help environment' does not list it: add it to environmentHelp in cmd/oprov/helptopics.go", m)
	}
}

// oprovVariables maps each OPROV_* name in a string literal of the module's code (tests, tests/,
// and examples left out) to one file naming it.
func oprovVariables(t *testing.T, root string) map[string]string {
	t.Helper()
	name := regexp.MustCompile(`OPROV_[A-Z0-9_]*[A-Z0-9]|\$\{?OPROV\b`) // $OPROV: a launcher script's
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case ".git", "tests", "examples":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, v := range name.FindAllString(s, -1) {
				v = strings.TrimLeft(v, "${")
				if _, seen := out[v]; !seen {
					out[v] = rel
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLoaderHelpAgrees: lock, install and init count the same modules' required_providers, and
// their help says so alike; run names every kind of source directory it builds.
func TestLoaderHelpAgrees(t *testing.T) {
	for _, cmd := range []string{"lock", "install", "init"} {
		stdout, _, _ := runCLI(t, cmd, "--help")
		flat := strings.Join(strings.Fields(stdout), " ")
		if !strings.Contains(flat, "remote") || strings.Contains(flat, "(the root module and local module calls)") {
			t.Errorf("oprov %s --help does not say remote modules' required_providers count:\n%s", cmd, stdout)
		}
	}
	stdout, _, _ := runCLI(t, "run", "--help")
	for _, kind := range []string{"Go module", "stdio provider", "Python project"} {
		if !strings.Contains(strings.Join(strings.Fields(stdout), " "), kind) {
			t.Errorf("oprov run --help does not name %q among the sources it builds:\n%s", kind, stdout)
		}
	}
}

// TestHelpLinksAreAddresses: help reaches the manual from a release, which has no docs/ to follow
// a relative path into: every page a help text (of any command, topic or flag) links is a full
// address of a page that exists, and no help names a docs/ path of its own.
func TestHelpLinksAreAddresses(t *testing.T) {
	relative := regexp.MustCompile(`(?:^|[^/\w])(docs/[\w./-]+)`)
	page := regexp.MustCompile(regexp.QuoteMeta(docPage) + `([\w-]+\.md)`)
	linked := 0
	for _, c := range allCommands(newRootCmd(&IOStreams{})) {
		texts := []string{c.Short, c.Long, c.Example}
		c.Flags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, text := range texts {
			for _, m := range relative.FindAllStringSubmatch(text, -1) {
				t.Errorf("%s: help names %s, a path a release does not hold: give %s", c.CommandPath(), m[1], docPage+"...")
			}
			for _, m := range page.FindAllStringSubmatch(text, -1) {
				linked++
				if _, err := os.Stat(filepath.Join("../../docs", m[1])); err != nil {
					t.Errorf("%s: help links %s, which is not a page of docs/", c.CommandPath(), m[0])
				}
			}
		}
	}
	if linked < 5 {
		t.Errorf("help links %d pages; the check found too few to mean anything", linked)
	}
}

// TestGuideTopics: 'oprov help oprov.hcl', 'oprov help remote' and 'oprov help replay' answer,
// each with the essentials and the address of its page, and oprov --help lists them.
func TestGuideTopics(t *testing.T) {
	for topic, want := range map[string][]string{
		"oprov.hcl": {"oci_mirror", "oci-layout:DIR", docPage + "oprov-hcl.md"},
		"remote":    {"remote \"example.com/acme/internal\"", "oprov provider host --stdio", docPage + "remote.md"},
		"replay":    {"--record FILE", "--replay FILE", "-detailed-exitcode", "125", docPage + "recording-format.md"},
	} {
		stdout, stderr, code := runCLI(t, "help", topic)
		if code != 0 {
			t.Errorf("oprov help %s: exit %d: %s", topic, code, stderr)
		}
		for _, w := range want {
			if !strings.Contains(stdout, w) {
				t.Errorf("oprov help %s does not say %q:\n%s", topic, w, stdout)
			}
		}
	}
	stdout, _, _ := runCLI(t, "--help")
	_, topics, _ := strings.Cut(stdout, "Additional help topics:")
	for _, name := range []string{"oprov.hcl", "remote", "replay", "exit-codes", "environment"} {
		if !strings.Contains(topics, "oprov "+name) {
			t.Errorf("oprov --help does not list the topic %s:\n%s", name, stdout)
		}
	}
}

// Remote execution is found from the two pages a newcomer reads first.
func TestHelpPointsToRemote(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}} {
		stdout, _, _ := runCLI(t, args...)
		if !strings.Contains(stdout, "'oprov help remote'") {
			t.Errorf("oprov %s does not point to 'oprov help remote':\n%s", strings.Join(args, " "), stdout)
		}
	}
	stdout, _, _ := runCLI(t, "help", "remote")
	for _, w := range []string{"hello_timeout", "exit 255"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("'oprov help remote' lacks %q", w)
		}
	}
}
