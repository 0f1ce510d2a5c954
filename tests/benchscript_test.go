package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// Every benchmark of this package is a row tests/bench.sh can run alone: it knows the peers the
// row needs (a '?' in --list is a benchmark it would refuse to run).
func TestBenchScriptKnowsEveryBenchmark(t *testing.T) {
	out, err := exec.Command("bash", "bench.sh", "--list").CombinedOutput()
	if err != nil {
		t.Fatalf("bench.sh --list: %v\n%s", err, out)
	}
	rows := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		rows++
		if f[1] == "?" {
			t.Errorf("tests/bench.sh has no peers for %s: add it to peers_of", f[0])
		}
	}
	if rows == 0 {
		t.Fatalf("bench.sh --list named no benchmark:\n%s", out)
	}
}
