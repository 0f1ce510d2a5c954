package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// allCommands is every command under root, root included, as a user reaches them.
func allCommands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		out = append(out, allCommands(c)...)
	}
	return out
}

// TestOneMeaningPerFlag: on every command -o is --output, the format (text or json), and no
// other flag; -v is --verbose wherever it exists; paths have flags of their own.
func TestOneMeaningPerFlag(t *testing.T) {
	// These print another program's output, HCL, help or a shell script, or (provider host) carry
	// a connection on stdout: no format to choose.
	noFormat := map[string]bool{"oprov": true, "init": true, "run": true, "tofurc": true, "help": true,
		"completion": true, "bash": true, "zsh": true, "fish": true, "powershell": true, "host": true}
	ios, _, _ := testIO()
	for _, c := range allCommands(newRootCmd(ios)) {
		if c.IsAdditionalHelpTopicCommand() { // 'oprov help TOPIC' prints it; nothing runs
			continue
		}
		if f := c.Flags().Lookup("output"); f == nil && !noFormat[c.Name()] {
			t.Errorf("%s has no -o/--output text|json", c.CommandPath())
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			name := c.CommandPath() + " --" + f.Name
			switch {
			case f.Shorthand == "o" && (f.Name != "output" || !strings.Contains(f.Usage, "text or json")):
				t.Errorf("%s: -o must be the output format (text or json), is %q", name, f.Usage)
			case f.Shorthand == "v" && f.Name != "verbose":
				t.Errorf("%s: -v must mean --verbose", name)
			case f.Name == "format" || f.Name == "out":
				t.Errorf("%s: the format is -o/--output; paths are --out-dir or --to", name)
			}
		})
	}
}

// TestDashOIsNeverAPath: -o dist on a command that writes files is refused with the flag to use.
func TestDashOIsNeverAPath(t *testing.T) {
	for args, want := range map[string]string{
		"package --bin x --version 1.0.0 -o dist": "use --out-dir dist",
		"pull oci-layout:x:1.0.0 -o dist":         "use --out-dir dist",
		"save oci-layout:x:1.0.0 -o p.tar":        "use --to p.tar",
		"inspect oci-layout:x -o yaml":            "-o/--output is the output format, text or json",
	} {
		_, stderr, code := runCLI(t, strings.Fields(args)...)
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("oprov %s: exit %d, stderr %q; want exit 2 saying %q", args, code, stderr, want)
		}
	}
}

// TestPullDashOJSONWritesNoJSONDirectory: 'pull REF -o json' prints JSON and writes the zips
// into --out-dir (default .), never into ./json/.
func TestPullDashOJSONWritesNoJSONDirectory(t *testing.T) {
	repo, _ := pushedLayout(t)
	t.Chdir(t.TempDir())
	stdout, stderr, code := runCLI(t, "pull", repo+":1.0.0", "-o", "json")
	if code != 0 {
		t.Fatalf("pull -o json: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat("json"); err == nil {
		t.Errorf("pull -o json made a directory named json")
	}
	if zips, _ := filepath.Glob("*.zip"); len(zips) != 2 {
		t.Errorf("pull wrote %v into the current directory, want 2 zips", zips)
	}
	var out struct{ Files []map[string]any }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || len(out.Files) != 2 {
		t.Fatalf("pull -o json printed %q (%v)", stdout, err)
	}
}

// TestVersionAndVerboseDoNotClash: --version (no -v) prints the version; -v at the root is bad
// usage; run and schema take -v as --verbose.
func TestVersionAndVerboseDoNotClash(t *testing.T) {
	stdout, _, code := runCLI(t, "--version")
	if code != 0 || !regexp.MustCompile(`^oprov \S+`).MatchString(stdout) {
		t.Errorf("--version: exit %d, %q", code, stdout)
	}
	if _, stderr, code := runCLI(t, "-v"); code != exitUsage || !strings.Contains(stderr, "'v'") {
		t.Errorf("oprov -v: exit %d, stderr %q; want a usage error", code, stderr)
	}
	ios, _, _ := testIO()
	root := newRootCmd(ios)
	for _, name := range []string{"run", "schema"} {
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		if f := c.Flags().ShorthandLookup("v"); f == nil || f.Name != "verbose" {
			t.Errorf("oprov %s -v is not --verbose", name)
		}
	}
}

func TestUnknownCommandExitsTwo(t *testing.T) {
	_, stderr, code := runCLI(t, "pussh", "dist", "repo")
	if code != exitUsage {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
	for _, want := range []string{`unknown command "pussh"`, "did you mean push", "'oprov --help'"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("unknown command: stderr %q does not say %q", stderr, want)
		}
	}
	if _, stderr, code := runCLI(t, "help", "pussh"); code != exitUsage || !strings.Contains(stderr, `unknown command "pussh"`) {
		t.Errorf("help for an unknown command: exit %d, stderr %q; want a usage error", code, stderr)
	}
	if stdout, _, code := runCLI(t, "help", "push"); code != 0 || !strings.Contains(stdout, "oprov push SRC... REPO") {
		t.Errorf("help push: exit %d, %q", code, stdout)
	}
	if stdout, _, code := runCLI(t); code != 0 || !strings.Contains(stdout, "Publish providers:") {
		t.Errorf("oprov without arguments: exit %d, want the help: %q", code, stdout)
	}
}

// TestEveryCommandHasAnExample walks every command's --help, as a user would, and fails on one
// without an Examples section.
func TestEveryCommandHasAnExample(t *testing.T) {
	ios, _, _ := testIO()
	for _, c := range allCommands(newRootCmd(ios)) {
		if c.IsAdditionalHelpTopicCommand() { // a topic's example is 'oprov help TOPIC'
			continue
		}
		args := append(strings.Fields(c.CommandPath())[1:], "--help")
		stdout, stderr, code := runCLI(t, args...)
		if code != 0 {
			t.Errorf("oprov %s: exit %d: %s", strings.Join(args, " "), code, stderr)
			continue
		}
		_, examples, ok := strings.Cut(stdout, "\nExamples:\n")
		examples, _, _ = strings.Cut(examples, "\n\n")
		if !ok || !strings.Contains(examples, c.CommandPath()) {
			t.Errorf("%s --help has no example that runs it:\n%s", c.CommandPath(), stdout)
		}
	}
}
