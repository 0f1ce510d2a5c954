package tests

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestOwnPackagesInitLight: oprov's own packages build nothing at start that a command may never
// use (a regular expression, a template): every command, and every provider launch through
// 'oprov __sandbox-exec', pays for each package's initialisation. Such values are built on first
// use (sync.OnceValue). Only the generated protocol stubs, which register their descriptors, may
// allocate more. It counts bytes, not time, so a loaded machine cannot fail it.
func TestOwnPackagesInitLight(t *testing.T) {
	t.Parallel()
	const budget = 8 << 10
	stubs := map[string]bool{
		"github.com/oprov/oprov/pkg/plugin/tfplugin5": true,
		"github.com/oprov/oprov/pkg/plugin/tfplugin6": true,
	}
	cmd := exec.Command(oprovBin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("oprov --version: %v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(string(out), "\n") {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," || !strings.HasPrefix(f[1], "github.com/oprov/oprov/") {
			continue
		}
		seen++
		bytes, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("reading %q: %v", line, err)
		}
		if bytes > budget && !stubs[f[1]] {
			t.Errorf("%s allocates %d bytes at start (budget %d): build its package-level values on first use (sync.OnceValue)", f[1], bytes, budget)
		}
	}
	if seen == 0 {
		t.Fatalf("GODEBUG=inittrace=1 printed no initialisation of oprov's packages:\n%s", out)
	}
}
