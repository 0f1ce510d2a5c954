//go:build unix

package loader

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExecInit: the process becomes 'PROGRAM init ARGS...' in the configuration directory, with
// TF_CLI_CONFIG_FILE naming oprov's configuration once, whatever the environment said before.
func TestExecInit(t *testing.T) {
	if out := os.Getenv("OPROV_TEST_EXEC_OUT"); out != "" {
		p := &Project{Dir: os.Getenv("OPROV_TEST_EXEC_DIR")}
		err := p.ExecInit(os.Getenv("OPROV_TEST_EXEC_PROGRAM"), "cli.tfrc", []string{"-upgrade"})
		t.Fatalf("ExecInit returned: %v", err)
	}
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("reads the environment as exec passed it from /proc")
	}
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	program := filepath.Join(t.TempDir(), "fake-tofu")
	// The environment as exec passed it (a shell's own would hide a duplicate, which a Go
	// program such as tofu reads first-wins).
	script := `#!/bin/sh
vars() { tr '\0' '\n' < /proc/$$/environ | grep '^TF_CLI_CONFIG_FILE='; }
printf '%s\n' "$PWD" "$*" "$(vars | wc -l)" "$(vars | head -n1 | cut -d= -f2-)" > "$OPROV_TEST_EXEC_OUT"
`
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestExecInit$")
	cmd.Env = append(os.Environ(), "OPROV_TEST_EXEC_OUT="+out, "OPROV_TEST_EXEC_DIR="+dir, "OPROV_TEST_EXEC_PROGRAM="+program, "TF_CLI_CONFIG_FILE=/elsewhere.tfrc")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cwd, _ := os.Getwd()
	want := []string{dir, "init -upgrade", "1", filepath.Join(cwd, "cli.tfrc")}
	if got := strings.Split(strings.TrimSpace(string(data)), "\n"); !slices.Equal(got, want) {
		t.Errorf("the program saw %q, want %q (cwd, args, one TF_CLI_CONFIG_FILE, its value)", got, want)
	}
}
