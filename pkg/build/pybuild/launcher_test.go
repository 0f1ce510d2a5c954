package pybuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakePython writes an interpreter named name into dir that reports version v to the launcher's
// probe and, when run for real (python -I -B -c CODE ...), prints the arguments after the code.
func fakePython(t *testing.T, dir, name, v string) {
	t.Helper()
	tag := "cp" + strings.ReplaceAll(v, ".", "")
	script := "#!/bin/sh\ncase \"$2\" in *version_info*) echo '" + v + " " + tag + "'; exit 0;; esac\n" +
		"shift 5\necho \"ran " + name + " with $*\"\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestPythonLauncherPicksVersion runs the launcher with fake interpreters on PATH and checks which
// one it runs, with which dependency set, or the one line it fails with.
func TestPythonLauncherPicksVersion(t *testing.T) {
	pkg := t.TempDir()
	exe := filepath.Join(pkg, "terraform-provider-x_v1.0.0")
	if err := os.WriteFile(exe, []byte(PythonLauncher("terraform-provider-x", "x.main:main", PythonVersions)), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, v := range PythonVersions {
		os.MkdirAll(filepath.Join(pkg, "lib", cpTag(v)), 0o755)
	}
	const none = "terraform-provider-x: no compatible Python: it needs CPython 3.11, 3.12, 3.13 as python3 on PATH"
	for _, tc := range []struct {
		name  string
		pys   map[string]string // interpreter name -> version it reports
		want  string            // stdout
		fails bool
	}{
		{"python3 in range", map[string]string{"python3": "3.12", "python3.11": "3.11"}, "ran python3 with " + pkg + "/lib/cp312 --dev", false},
		{"oldest claimed", map[string]string{"python3": "3.11"}, "ran python3 with " + pkg + "/lib/cp311 --dev", false},
		{"python3 too old, python3.13 beside it", map[string]string{"python3": "3.10", "python3.13": "3.13"}, "ran python3.13 with " + pkg + "/lib/cp313 --dev", false},
		{"python3 too new", map[string]string{"python3": "3.14"}, none + " (python3 is 3.14)", true},
		{"every one out of range", map[string]string{"python3": "3.10", "python3.12": "3.9"}, none + " (python3 is 3.10, python3.12 is 3.9)", true},
		{"no python at all", nil, none + " (no python3 on PATH)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			for name, v := range tc.pys {
				fakePython(t, bin, name, v)
			}
			cmd := exec.Command(exe, "--dev")
			cmd.Env = []string{"PATH=" + bin}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("stdout %q, want %q", got, tc.want)
			}
			if tc.fails && (err == nil || strings.TrimSpace(stderr.String()) != tc.want) {
				t.Errorf("err %v, stderr %q: want exit 1 and the one line on stderr too", err, stderr.String())
			}
			if !tc.fails && err != nil {
				t.Errorf("launcher failed: %v (stderr %q)", err, stderr.String())
			}
		})
	}
}
