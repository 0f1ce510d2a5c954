package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageShowsEachPlatform: `oprov package --go examples/hello` for four platforms, its stderr
// a pipe, prints a line as each platform's build starts and another as it ends, in that order,
// with nothing redrawn in place.
func TestPackageShowsEachPlatform(t *testing.T) {
	platforms := []string{"linux_amd64", "linux_arm64", "darwin_arm64", "windows_amd64"}
	r := mustOprov(t, nil, "package", "--go", filepath.Join(repoRoot, "examples", "hello"), "--version", "1.0.0",
		"--platform", strings.Join(platforms, ","), "--out-dir", t.TempDir())
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	at := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return i
			}
		}
		return -1
	}
	for i, p := range platforms {
		step := "building hello for " + strings.Replace(p, "_", "/", 1)
		start := at(step + ": started (")
		done := at(step + ": done in ")
		if start < 0 || done < start {
			t.Errorf("%s: start at line %d, end at line %d; want a line for each, in order:\n%s", p, start, done, r.Stderr)
		}
		if want := "(" + string(rune('1'+i)) + "/4)"; done >= 0 && !strings.HasSuffix(lines[done], want) {
			t.Errorf("%q does not end %s", lines[done], want)
		}
	}
	if len(lines) != 2*len(platforms) || strings.ContainsAny(r.Stderr, "\r\x1b") {
		t.Errorf("stderr holds %d lines, want %d, none redrawn:\n%q", len(lines), 2*len(platforms), r.Stderr)
	}
	t.Logf("stderr:\n%s", r.Stderr)
}
