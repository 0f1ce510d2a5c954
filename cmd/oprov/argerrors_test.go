package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestArgumentErrorsAcrossCommands walks the command tree: every command given an unknown flag,
// and every command given a wrong number of arguments, exits 2 (125 under run and init, whose
// other codes are the wrapped command's), says so on stderr, and with -o json prints one JSON
// object {"error", "exit_code"} on stdout, for a flag that could not be parsed too.
func TestArgumentErrorsAcrossCommands(t *testing.T) {
	// Nothing a command might do by mistake reaches the user's files.
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("DOCKER_CONFIG", dir)
	t.Chdir(dir)
	// Commands that take any number of arguments, so that no count is wrong: init passes them to
	// tofu init, help names a command with them.
	anyCount := map[string]bool{"oprov init": true, "oprov help": true}
	ios, _, _ := testIO()
	tested := 0
	for _, c := range allCommands(newRootCmd(ios)) {
		if c.IsAdditionalHelpTopicCommand() || !c.HasParent() {
			continue
		}
		path := strings.Fields(c.CommandPath())[1:]
		want := exitUsage
		if wrapsCommand(c) {
			want = exitWrapperFailed
		}
		hasJSON := c.Flags().Lookup("output") != nil
		check := func(t *testing.T, args []string, stderrWant string) {
			t.Helper()
			stdout, stderr, code := runCLI(t, args...)
			if code != want || !strings.Contains(stderr, stderrWant) {
				t.Errorf("oprov %s: exit %d, want %d; stderr %q (want %q)", strings.Join(args, " "), code, want, stderr, stderrWant)
			}
			if !hasJSON {
				return
			}
			var got struct {
				Error    *string `json:"error"`
				ExitCode int     `json:"exit_code"`
			}
			dec := json.NewDecoder(strings.NewReader(stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil || dec.More() || got.Error == nil || got.ExitCode != code || !strings.Contains(*got.Error, stderrWant) {
				t.Errorf("oprov %s: stdout is not one JSON object {\"error\": ..., \"exit_code\": %d}: %v\n%s", strings.Join(args, " "), code, err, stdout)
			}
		}
		t.Run(strings.Join(path, "_"), func(t *testing.T) {
			tested++
			flagArgs := append(append([]string{}, path...), "--no-such-flag")
			if hasJSON {
				// After the bad flag: the parse stops at it, so -o json is never set.
				flagArgs = append(flagArgs, "-o", "json")
			}
			check(t, flagArgs, "unknown flag: --no-such-flag")
			if anyCount[c.CommandPath()] {
				return
			}
			// Too many arguments for a command with a maximum, none for one that wants some
			// (run wants a command, save references or --config: its zero is a usage error too).
			countArgs := append([]string{}, path...)
			if hasJSON {
				countArgs = append(countArgs, "-o", "json")
			}
			switch c.CommandPath() {
			case "oprov run", "oprov save", "oprov push":
			default:
				for i := 0; i < 9; i++ {
					countArgs = append(countArgs, "extra")
				}
			}
			stderrWant := "wants"
			switch c.CommandPath() {
			case "oprov save":
				stderrWant = "--to FILE.tar is required"
			case "oprov completion", "oprov provider", "oprov cache", "oprov sandbox":
				stderrWant = "subcommand"
			}
			check(t, countArgs, stderrWant)
		})
	}
	if tested < 30 {
		t.Errorf("walked %d commands; the tree has more", tested)
	}
}
