package tests

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestBinaryIsStatic: the README's install line builds a static executable (no dynamic loader,
// no libc), which runs on any Linux and starts sooner; the e2e tests measure that same build.
func TestBinaryIsStatic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF check")
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^((?:[A-Z_]+=\S+ )*)go install github.com/oprov/oprov/cmd/oprov@`).FindSubmatch(readme)
	if line == nil {
		t.Fatal("README has no 'go install github.com/oprov/oprov/cmd/oprov@...' line")
	}
	exe := filepath.Join(t.TempDir(), "oprov")
	build := exec.Command("go", "build", "-o", exe, "./cmd/oprov")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), strings.Fields(string(line[1]))...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build with the README's settings %q: %v\n%s", line[1], err, out)
	}
	for _, bin := range []string{exe, oprovBin} {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked (it names an interpreter): build it with CGO_ENABLED=0", bin)
			}
		}
		f.Close()
	}
}
