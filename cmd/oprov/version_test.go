package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFromBuildInfo: the version is the module version the build recorded, with the
// commit from the VCS stamp or a pseudo-version; a work-tree build without either is "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"go install @v1.4.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: modulePath, Version: "v1.4.0"}},
			"oprov v1.4.0 (built with go1.26.8)"},
		{"go install @pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: modulePath, Version: "v0.0.0-20260102030405-abcdef123456"}},
			"oprov v0.0.0-20260102030405-abcdef123456 (commit abcdef123456, built with go1.26.8)"},
		{"go install @pre-release pseudo-version", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.5.0-rc.1.0.20260102030405-abcdef123456"}},
			"oprov v1.5.0-rc.1.0.20260102030405-abcdef123456 (commit abcdef123456)"},
		{"go build in a clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: vcs},
			"oprov dev (commit 0123456789abcdef0123456789abcdef01234567 with local changes, 2026-01-02T03:04:05Z, built with go1.26.8)"},
		{"a dependency of another module", &debug.BuildInfo{Main: debug.Module{Path: "example.com/tools"},
			Deps: []*debug.Module{{Path: "other/x", Version: "v9.0.0"}, {Path: modulePath, Version: "v1.2.3"}}}, "oprov v1.2.3"},
		{"replaced", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.0.0", Replace: &debug.Module{Path: modulePath, Version: "v1.0.1"}}}, "oprov v1.0.1"},
		{"no build info", nil, "oprov dev"},
	} {
		if got := versionFrom(tc.bi).String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestVersionCommandAndFlagAgree: 'oprov version' and 'oprov --version' print the same line, with
// or without the fast path (which answers before any command is built).
func TestVersionCommandAndFlagAgree(t *testing.T) {
	want := currentVersion().String() + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}, {"version", "-o", "text"}, {"--version", "--chdir-is-not-a-root-flag"}} {
		stdout, stderr, code := runCLI(t, args...)
		if len(args) == 2 && args[0] == "--version" {
			if code != exitUsage {
				t.Errorf("oprov %s: exit %d, want 2 (the fast path must not swallow other arguments)", strings.Join(args, " "), code)
			}
			continue
		}
		if code != 0 || stdout != want || stderr != "" {
			t.Errorf("oprov %s: exit %d, stdout %q, stderr %q; want %q", strings.Join(args, " "), code, stdout, stderr, want)
		}
	}
	stdout, _, code := runCLI(t, "version", "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"version": "`) || !strings.Contains(stdout, `"go": "go`) {
		t.Errorf("oprov version -o json: exit %d, %q", code, stdout)
	}
}
