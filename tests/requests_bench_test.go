package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// countRequests runs an oprov binary with OPROV_DEBUG_HTTP=1 in dir and counts the registry
// requests it made, by method and path kind.
func countRequests(b *testing.B, bin, dir string, env []string, args ...string) (int, map[string]int) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "OPROV_DEBUG_HTTP=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	n, kinds := requestsIn(string(out))
	return n, kinds
}

// requestsIn counts the requests OPROV_DEBUG_HTTP=1 logged in out, by method and path kind.
func requestsIn(out string) (int, map[string]int) {
	kinds := map[string]int{}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "http:" {
			continue
		}
		i := 1
		for i < len(f)-1 && !strings.Contains("GET HEAD PUT POST PATCH DELETE", f[i]) {
			i++
		}
		method, url := f[i], f[i+1]
		n++
		kind := "other"
		for _, k := range []string{"/manifests/", "/blobs/", "/tags/list", "/referrers/"} {
			if strings.Contains(url, k) {
				kind = strings.Trim(k, "/")
			}
		}
		if strings.HasSuffix(url, "/v2/") {
			kind = "ping"
		}
		kinds[method+" "+kind]++
	}
	return n, kinds
}

// BenchmarkInstallRequests prints how many registry requests a cold 'oprov install' of a signed
// 3-platform release makes, with and without a lock file. OPROV_BENCH_BASELINE names another
// oprov binary to count side by side (for example one built from an earlier commit).
func BenchmarkInstallRequests(b *testing.B) {
	f := newLoaderFixture(b, helloConfig)
	bins := map[string]string{"this build": oprovBin}
	if base := os.Getenv("OPROV_BENCH_BASELINE"); base != "" {
		bins["baseline"] = base
	}
	fmt.Printf("\nregistry requests of a cold 'oprov install' (examples/hello signed, %d platforms):\n", len(helloPlatforms))
	for _, name := range []string{"baseline", "this build"} {
		bin, ok := bins[name]
		if !ok {
			continue
		}
		cold := func() []string {
			return append(append([]string{}, f.env...), "OPROV_CACHE_DIR="+filepath.Join(b.TempDir(), "cold"))
		}
		noLock, kinds := countRequests(b, bin, f.freshCopy(b), cold(), "install")
		locked := f.freshCopy(b)
		countRequests(b, bin, locked, cold(), "lock")
		withLock, _ := countRequests(b, bin, locked, cold(), "install")
		fmt.Printf("  %-10s no lock: %3d requests %v\n  %-10s with lock: %d requests\n", name, noLock, kinds, "", withLock)
		b.ReportMetric(float64(noLock), strings.ReplaceAll(name, " ", "-")+"-requests")
	}
}
