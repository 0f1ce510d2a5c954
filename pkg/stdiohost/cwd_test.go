package stdiohost

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCommandFoundInItsDirectory: the command is found in the provider's directory while the
// program runs in the host's working directory (tofu's): its program given with a slash and the
// arguments that name its files are made absolute, the rest left as written.
func TestCommandFoundInItsDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "provider.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := inDir(dir, "python3", true); got != "python3" {
		t.Errorf("a program on PATH became %q", got)
	}
	if got := inDir(dir, "./run", true); got != filepath.Join(dir, "run") {
		t.Errorf("./run became %q", got)
	}
	got := commandArgs(dir, []string{"provider.py", "-u", "missing.py", "/abs/x"})
	if want := []string{filepath.Join(dir, "provider.py"), "-u", "missing.py", "/abs/x"}; !slices.Equal(got, want) {
		t.Errorf("arguments %q, want %q", got, want)
	}
}
