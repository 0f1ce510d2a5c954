package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSandboxCheck(t *testing.T) {
	t.Setenv("OPROV_TEST_LANDLOCK_ABI", "5")
	stdout, stderr, code := runCLI(t, "sandbox", "check", "-o", "json")
	var r struct {
		LandlockABI int  `json:"landlock_abi"`
		Simulated   bool `json:"simulated"`
		Complete    bool `json:"complete"`
		Parts       []struct {
			What      string
			Supported bool
		}
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("sandbox check -o json: %v\n%s", err, stdout)
	}
	if r.LandlockABI != 5 || !r.Simulated || r.Complete || code != exitError || !strings.Contains(stderr, "best_effort = true") {
		t.Errorf("with ABI 5 simulated: %+v, exit %d, %s", r, code, stderr)
	}
	for _, p := range r.Parts {
		if strings.HasPrefix(p.What, "abstract unix socket") == p.Supported {
			t.Errorf("part %q supported = %v at ABI 5", p.What, p.Supported)
		}
	}
	t.Setenv("OPROV_TEST_LANDLOCK_ABI", "0")
	stdout, _, _ = runCLI(t, "sandbox")
	if !strings.Contains(stdout, "Landlock ABI 0") || !strings.Contains(stdout, "NO   file system rules") {
		t.Errorf("sandbox with ABI 0 simulated:\n%s", stdout)
	}
}
