package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// The documented CI command, 'oprov run --replay FILE -- tofu plan -detailed-exitcode', pasted
// as a script would run it: a plan with changes exits 2 (tofu's own code, passed through), and
// no failure of oprov's own (a mistyped flag, a bad --replay-ignore, a missing recording) exits
// 2 or 1: they exit 125, so the script cannot take them for "the plan has changes".
func TestRunExitCodesBesideDetailedExitcode(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	db := filepath.Join(t.TempDir(), "kv.json")
	writeFile(t, db, `{}`)
	tf := fmt.Sprintf(kvReplay, db, "")
	cfg, env := stdioDir(t, filepath.Join(repoRoot, "examples", "stdio-python"), "example.com/acme/kv", tf)
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	mustOprov(t, env, "run", "-C", cfg, "--record", rec, "--", tofu, "apply", "-auto-approve", "-input=false")
	off := offlineEnv(env)

	plan := func(oprovFlags ...string) result {
		args := append([]string{"run", "-C", cfg}, oprovFlags...)
		return oprov(t, off, append(args, "--", tofu, "plan", "-detailed-exitcode", "-input=false", "-no-color")...)
	}
	if r := plan("--replay", rec); r.Code != 0 {
		t.Fatalf("replayed plan of the recorded apply: exit %d, want 0 (no changes)\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		code  int
		say   string
	}{
		{"mistyped flag", []string{"--repaly", rec}, 125, "unknown flag: --repaly"},
		{"bad --replay-ignore", []string{"--replay", rec, "--replay-ignore", "name"}, 125, "give TYPE.ATTRIBUTE"},
		{"--replay-ignore without --replay", []string{"--replay-ignore", "kv_entry.value"}, 125, "needs --replay"},
		{"--record with --replay", []string{"--record", rec + ".new", "--replay", rec}, 125, "cannot be used together"},
		{"missing recording", []string{"--replay", rec + ".missing"}, 125, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := plan(tc.flags...)
			if r.Code != tc.code || !strings.Contains(r.Stderr, tc.say) {
				t.Errorf("oprov run %s -- tofu plan -detailed-exitcode: exit %d, want %d; stderr %q (want %q)", strings.Join(tc.flags, " "), r.Code, tc.code, r.Stderr, tc.say)
			}
		})
	}

	t.Run("plan with changes", func(t *testing.T) {
		// With the state gone, every recorded resource is to be created again: the plan has
		// changes, and the replay answers it from the apply's own planning calls.
		if err := os.Remove(filepath.Join(cfg, "terraform.tfstate")); err != nil {
			t.Fatal(err)
		}
		r := plan("--replay", rec)
		if r.Code != 2 || !strings.Contains(r.Stdout, "to add") {
			t.Errorf("replayed plan with changes: exit %d, want 2 (tofu's)\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})

	t.Run("command not found", func(t *testing.T) {
		r := oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", filepath.Join(cfg, "no-such-tofu"), "plan")
		if r.Code != 127 {
			t.Errorf("a command that does not exist: exit %d, want 127\n%s", r.Code, r.Stderr)
		}
		notExec := filepath.Join(cfg, "not-executable")
		writeFile(t, notExec, "#!/bin/sh\nexit 0\n")
		if err := os.Chmod(notExec, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := oprov(t, off, "run", "-C", cfg, "--replay", rec, "--", notExec); r.Code != 126 {
			t.Errorf("a command that is not executable: exit %d, want 126\n%s", r.Code, r.Stderr)
		}
	})
}
