package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/sandbox"
)

// BenchmarkStartup prints the median wall time of 'oprov --version' and of the sandbox step
// 'oprov __sandbox-exec' (starting a bare program under a sandbox), against a bare static Go
// hello-world built here with the same toolchain, over interleaved runs; the same step through
// oprov-sandbox; the executables' sizes; and the package initialisations that cost the most
// (GODEBUG=inittrace=1), which is where start-up time goes.
func BenchmarkStartup(b *testing.B) {
	hello := buildHello(b)
	helper := filepath.Join(b.TempDir(), "oprov-sandbox")
	build := exec.Command("go", "build", "-o", helper, "./cmd/oprov-sandbox")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building oprov-sandbox: %v\n%s", err, out)
	}
	spec, err := sandbox.Plan(sandbox.Spec{Name: "bench", Exec: []string{filepath.Dir(hello)}, Write: []string{"/dev/null"}, Env: []string{"PATH"}}, sandbox.Probe())
	if err != nil {
		b.Fatal(err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	rounds := max(b.N, 101)
	var bare, version, viaOprov, viaHelper []time.Duration
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		bare = append(bare, timeCmd(b, nil, hello))
		version = append(version, timeCmd(b, nil, oprovBin, "--version"))
		viaOprov = append(viaOprov, timeCmd(b, nil, oprovBin, sandbox.ExecCommand, string(specJSON), hello))
		viaHelper = append(viaHelper, timeCmd(b, nil, helper, sandbox.ExecCommand, string(specJSON), hello))
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	ratio := func(d []time.Duration) float64 { return ms(median(d)) / ms(median(bare)) }
	b.ReportMetric(ms(median(version)), "ms-version")
	b.ReportMetric(ms(median(viaOprov)), "ms-sandbox-exec")
	b.ReportMetric(ms(median(bare)), "ms-bare-go")
	fmt.Printf("\nstart-up, median of %d interleaved runs (target: <= 3.5x the bare program):\n", rounds)
	fmt.Printf("  bare static Go hello-world                      %6.2f ms\n", ms(median(bare)))
	fmt.Printf("  oprov --version                                 %6.2f ms  ratio %.1fx\n", ms(median(version)), ratio(version))
	fmt.Printf("  oprov __sandbox-exec SPEC hello-world           %6.2f ms  ratio %.1fx\n", ms(median(viaOprov)), ratio(viaOprov))
	fmt.Printf("  oprov-sandbox __sandbox-exec SPEC hello-world   %6.2f ms  ratio %.1fx\n", ms(median(viaHelper)), ratio(viaHelper))
	for _, exe := range []string{oprovBin, helper} {
		if fi, err := os.Stat(exe); err == nil {
			fmt.Printf("  size of %-13s %5.1f MiB\n", filepath.Base(exe), float64(fi.Size())/(1<<20))
		}
	}
	total, top := heaviestInits(b, 10, 8)
	fmt.Printf("  package initialisation: %.2f ms in all; the heaviest:\n", total)
	for _, in := range top {
		fmt.Printf("    %6.3f ms  %s\n", in.ms, in.pkg)
	}
}

// buildHello builds a Go program that prints one line and exits, the floor for start-up.
func buildHello(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	writeFile(b, filepath.Join(dir, "go.mod"), "module hello\n\ngo 1.26\n")
	writeFile(b, filepath.Join(dir, "main.go"), "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello\\n\") }\n")
	build := exec.Command("go", "build", "-o", "hello", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building hello-world: %v\n%s", err, out)
	}
	return filepath.Join(dir, "hello")
}

type initCost struct {
	pkg string
	ms  float64
}

// heaviestInits runs 'oprov --version' with GODEBUG=inittrace=1 runs times and gives the total
// initialisation time and the n packages whose init took longest, each the median of the runs
// (so that one preempted run does not rank a package).
func heaviestInits(b *testing.B, runs, n int) (float64, []initCost) {
	b.Helper()
	samples := map[string][]float64{}
	for i := 0; i < runs; i++ {
		cmd := exec.Command(oprovBin, "--version")
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("oprov --version: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			// init PKG @T ms, C ms clock, B bytes, A allocs
			f := strings.Fields(line)
			if len(f) >= 7 && f[0] == "init" && f[6] == "clock," {
				ms, _ := strconv.ParseFloat(f[4], 64)
				samples[f[1]] = append(samples[f[1]], ms)
			}
		}
	}
	var all []initCost
	total := 0.0
	for p, s := range samples {
		sort.Float64s(s)
		all = append(all, initCost{p, s[len(s)/2]})
		total += s[len(s)/2]
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ms > all[j].ms })
	return total, all[:min(n, len(all))]
}
