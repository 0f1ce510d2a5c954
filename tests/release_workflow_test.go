package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReleaseWorkflowStopsOnAFailedToolInstall: the release workflow's step that builds the pinned
// goreleaser, syft and cosign fails when the build fails, run as GitHub runs a step (bash -e),
// rather than going on to release with whatever tools the runner has on its PATH, or none.
func TestReleaseWorkflowStopsOnAFailedToolInstall(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var step string
	for _, line := range strings.Split(string(data), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "- run:"); ok && strings.Contains(s, "tests/tools/install.sh") {
			step = strings.TrimSpace(s)
		}
	}
	if step == "" {
		t.Fatal("release.yml has no one-line 'run:' step calling tests/tools/install.sh")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tests", "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The install fails after printing part of its output, as a failed build does.
	stub := "echo building >&2\necho " + filepath.Join(dir, "partial-bin") + "\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, "tests", "tools", "install.sh"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	ghPath := filepath.Join(dir, "github_path")
	cmd := exec.Command("bash", "--noprofile", "--norc", "-e", "-c", step)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GITHUB_PATH="+ghPath)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("the step %q succeeded although the tool install failed:\n%s", step, out)
	}
	if b, _ := os.ReadFile(ghPath); len(b) > 0 {
		t.Errorf("the step added %q to the PATH after a failed install", b)
	}
}
