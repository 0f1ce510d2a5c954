package tests

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
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
	// Without the README's settings a build here would link libc (cgo on, a C compiler found);
	// otherwise this check could not tell the README's line from any other.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "CGO_ENABLED=") })
	probe := exec.Command("go", "env", "CGO_ENABLED")
	probe.Env = env
	if out, err := probe.Output(); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Skipf("go builds without cgo here anyway (CGO_ENABLED=%s): the README's setting cannot be told apart", strings.TrimSpace(string(out)))
	}
	exe := filepath.Join(t.TempDir(), "oprov")
	build := exec.Command("go", "build", "-o", exe, "./cmd/oprov")
	build.Dir = repoRoot
	build.Env = append(env, strings.Fields(string(line[1]))...)
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
