package tests

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/gate"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// bigMB is the size of each platform's zip in the kill tests: large enough that a kill often
// lands in a download, small enough for CI.
const bigMB = 50

// bigRelease is a TLS registry holding example.com/acme/bench 1.0.0: 3 platforms (this machine's
// and two others) of mb MiB of incompressible bytes each, unsigned.
type bigRelease struct {
	reg  *testreg.Registry
	repo string            // HOST/providers/acme/bench
	sums map[string]string // zip name -> hex sha256
	env  []string
}

func newBigRelease(t testing.TB, mb int) *bigRelease {
	t.Helper()
	b := &bigRelease{reg: testreg.Start(t, testreg.Options{}), sums: map[string]string{}}
	b.repo = b.reg.Host + "/providers/acme/bench"
	b.env = []string{"SSL_CERT_FILE=" + b.reg.CAFile, "HOME=" + t.TempDir()}
	dist := t.TempDir()
	paths, sums := syntheticReleaseOf(t, dist, mb, helloPlatforms)
	for i, p := range paths {
		b.sums[filepath.Base(p)] = sums[i]
	}
	mustOprov(t, b.env, "push", dist, b.repo, "--address", "example.com/acme/bench")
	return b
}

// config writes a configuration that needs the bench provider from the repository on host (the
// registry, or a relay before it) and gives its directory.
func (b *bigRelease) config(t testing.TB, host string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.tf"), `terraform {
  required_providers {
    bench = { source = "example.com/acme/bench", version = "1.0.0" }
  }
}
`)
	writeFile(t, filepath.Join(dir, "oprov.hcl"), `oci_mirror {
  repository_template = "`+host+`/providers/${namespace}/${type}"
  include             = ["example.com/acme/*"]
}
`)
	return dir
}

// envWith gives b's environment plus more variables.
func (b *bigRelease) envWith(more ...string) []string {
	return append(append([]string{}, b.env...), more...)
}

// timed runs oprov to completion and gives its wall time: how long a whole run takes, to spread
// kills over it.
func timed(t *testing.T, env []string, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	mustOprov(t, env, args...)
	return time.Since(start)
}

// treeBytes adds up the regular files under path.
func treeBytes(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// ownedTempBytes adds up what owned temporary directories hold in dir (not below it).
func ownedTempBytes(dir string) (n int64, names []string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".oprov-tmp-") {
			n += treeBytes(filepath.Join(dir, e.Name()))
			names = append(names, e.Name())
		}
	}
	return n, names
}

// garbage tallies what killed runs left behind, to show the kills landed in downloads.
type garbage struct {
	runs int   // killed runs that left something
	most int64 // the most bytes found after one kill
}

func (g *garbage) add(n int64) {
	if n > 0 {
		g.runs++
		g.most = max(g.most, n)
	}
}

func (g *garbage) report(t *testing.T, where string) {
	t.Helper()
	t.Logf("%d killed runs left temporary files in %s (up to %d MiB at once)", g.runs, where, g.most>>20)
	if g.runs == 0 {
		t.Fatalf("no killed run left a temporary file in %s: the kills missed every download", where)
	}
}

// cacheInventory is what 'oprov cache -o json' prints, as far as these tests read it.
type cacheInventory struct {
	Size    int64 `json:"size"`
	Entries []struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
		Size int64  `json:"size"`
	} `json:"entries"`
	Temp struct {
		Size   int64 `json:"size"`
		Owners []struct {
			PID  int   `json:"pid"`
			Live bool  `json:"live"`
			Size int64 `json:"size"`
		} `json:"owners"`
		Cleared struct {
			Owners int `json:"owners"`
		} `json:"cleared"`
	} `json:"temp"`
}

// checkCacheAccounts checks a cache no run is using: its temporary space is empty, its size on
// disk equals the sum of its entries as 'oprov cache' lists them, and 'oprov cache verify' finds
// every entry matching its digest.
func checkCacheAccounts(t *testing.T, env []string, cache string) {
	t.Helper()
	if left, _ := os.ReadDir(filepath.Join(cache, "tmp")); len(left) != 0 {
		t.Errorf("the cache's temporary space holds %d entries after a normal run: %v", len(left), left)
	}
	var inv cacheInventory
	decodeJSON(t, mustOprov(t, env, "cache", "--cache-dir", cache, "-o", "json").Stdout, &inv)
	var sum int64
	for _, e := range inv.Entries {
		sum += e.Size
	}
	if disk := treeBytes(cache); disk != sum || inv.Size != sum {
		t.Errorf("the cache holds %d bytes on disk; its entries add up to %d (reported total %d)", disk, sum, inv.Size)
	}
	if inv.Temp.Size != 0 || len(inv.Temp.Owners) != 0 {
		t.Errorf("'oprov cache' reports temporary space: %+v", inv.Temp)
	}
	var ver struct {
		Checked   int   `json:"checked"`
		Problems  []any `json:"problems"`
		Unchecked []any `json:"unchecked"`
	}
	decodeJSON(t, mustOprov(t, env, "cache", "verify", "--cache-dir", cache, "-o", "json").Stdout, &ver)
	if ver.Checked != len(inv.Entries) || len(ver.Problems) != 0 || len(ver.Unchecked) != 0 {
		t.Errorf("cache verify: %+v, over %d entries", ver, len(inv.Entries))
	}
}

// TestKilledInstallsLeaveNoGarbage: 20 installs of a 3 x 50 MiB release killed with SIGKILL at
// random points, then one normal install. Afterwards the cache's temporary space is empty, its
// size on disk is the sum of its entries, and every entry matches its digest.
func TestKilledInstallsLeaveNoGarbage(t *testing.T) {
	b := newBigRelease(t, bigMB)
	cfg := b.config(t, b.reg.Host)
	cache := filepath.Join(t.TempDir(), "cache")
	env := b.envWith("OPROV_CACHE_DIR=" + cache)
	// A cold install without a lock file locks every platform (fetching all three zips), then
	// unpacks this machine's.
	full := timed(t, b.envWith("OPROV_CACHE_DIR="+filepath.Join(t.TempDir(), "timing")), "install", "-C", b.config(t, b.reg.Host))
	t.Logf("a cold install without a lock file takes %v", full)
	rng := seededRand(t)
	var g garbage
	killRuns(t, rng, 20, full, env, func() {
		// Every run downloads at least this machine's zip (the others too when the lock file
		// is gone) and mostly unpacks it: the kills land in downloads and unpacking.
		os.RemoveAll(filepath.Join(cache, "blobs"))
		if rng.IntN(4) > 0 {
			os.RemoveAll(filepath.Join(cache, "mirror"))
		}
		if rng.IntN(2) == 0 {
			os.RemoveAll(filepath.Join(cache, "versions"))
		}
		if rng.IntN(2) == 0 {
			os.Remove(filepath.Join(cfg, ".terraform.lock.hcl"))
		}
	}, func() { g.add(treeBytes(filepath.Join(cache, "tmp"))) }, "install", "-C", cfg)
	g.report(t, "the cache")

	mustOprov(t, env, "install", "-C", cfg)
	checkCacheAccounts(t, env, cache)
	var lockH1 []string
	for _, h := range lockHashes(t, filepath.Join(cfg, ".terraform.lock.hcl"), "example.com/acme/bench") {
		if strings.HasPrefix(h, "h1:") {
			lockH1 = append(lockH1, h)
		}
	}
	checkCache(t, cache, lockH1)
	filepath.WalkDir(cfg, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasPrefix(d.Name(), ".oprov-tmp-") || strings.Contains(d.Name(), ".tmp-")) {
			t.Errorf("a temporary file is left in the configuration: %s", p)
		}
		return nil
	})
}

// TestKilledPullsLeaveNoGarbage: 20 pulls of the same release into one directory killed with
// SIGKILL at random points, then one normal pull. Afterwards the directory holds the zips and
// SHA256SUMS, each whole, and nothing else.
func TestKilledPullsLeaveNoGarbage(t *testing.T) {
	b := newBigRelease(t, bigMB)
	out := t.TempDir()
	full := timed(t, b.env, "pull", b.repo+":1.0.0", "--out-dir", t.TempDir())
	t.Logf("a pull takes %v", full)
	rng := seededRand(t)
	var g garbage
	killRuns(t, rng, 20, full, b.env, func() {
		for name := range b.sums {
			if rng.IntN(2) == 0 {
				os.Remove(filepath.Join(out, name))
			}
		}
	}, func() { n, _ := ownedTempBytes(out); g.add(n) }, "pull", b.repo+":1.0.0", "--out-dir", out)
	g.report(t, "the output directory")

	mustOprov(t, b.env, "pull", b.repo+":1.0.0", "--out-dir", out)
	entries, _ := os.ReadDir(out)
	if len(entries) != len(b.sums)+1 {
		t.Errorf("the output directory holds %v, want the %d zips and SHA256SUMS", entries, len(b.sums))
	}
	for _, e := range entries {
		want, isZip := b.sums[e.Name()]
		switch {
		case e.Name() == "terraform-provider-bench_1.0.0_SHA256SUMS":
		case !isZip:
			t.Errorf("left in the output directory: %s", e.Name())
		case fileSHA256(t, filepath.Join(out, e.Name())) != want:
			t.Errorf("%s does not match its digest", e.Name())
		}
	}
}

// TestKilledSavesLeaveNoGarbage: saves killed with SIGKILL leave nothing beside the tarball that
// the next save there does not remove, and that save's tarball is whole.
func TestKilledSavesLeaveNoGarbage(t *testing.T) {
	b := newBigRelease(t, bigMB)
	dir := t.TempDir()
	tarball := filepath.Join(dir, "providers.tar")
	full := timed(t, b.env, "save", b.repo+":1.0.0", "--to", filepath.Join(t.TempDir(), "timing.tar"))
	t.Logf("a save takes %v", full)
	var g garbage
	killRuns(t, seededRand(t), 8, full, b.env, func() { os.Remove(tarball) },
		func() { n, _ := ownedTempBytes(dir); g.add(n) }, "save", b.repo+":1.0.0", "--to", tarball)
	g.report(t, "the tarball's directory")

	mustOprov(t, b.env, "save", b.repo+":1.0.0", "--to", tarball)
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("beside the tarball: %v, want only it", entries)
	}
	// The tarball is whole: load reads and checks every blob before it pushes anything.
	mustOprov(t, b.env, "load", tarball, "--to", "oci-layout:"+filepath.Join(t.TempDir(), "loaded"))
}

// TestSweepSparesALiveDownload: an install is held mid-download (a relay before the registry
// stops its zip after 8 MiB); meanwhile other runs open the same cache, each sweeping it: an
// install of another provider, 'oprov cache' and 'oprov cache prune'. They see the first run's
// download as live and leave it alone, and once the relay lets go it completes.
func TestSweepSparesALiveDownload(t *testing.T) {
	b := newBigRelease(t, bigMB)
	relay := gate.Start(t, b.reg.Host, 8<<20)
	cache := filepath.Join(t.TempDir(), "cache")
	env := b.envWith("OPROV_CACHE_DIR=" + cache)
	slow := exec.Command(oprovBin, "install", "-C", b.config(t, relay.Addr))
	slow.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	slow.Stderr = &stderr
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- slow.Wait() }()
	select {
	case <-relay.Held():
	case err := <-exited:
		t.Fatalf("the install ended before its download was held: %v\n%s", err, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the install's download never reached the relay's threshold")
	}
	partial := heldDownload(t, cache, slow.Process.Pid)

	// Other runs on the same cache, each of which sweeps it when it opens it.
	mustOprov(t, b.env, "push", helloRelease(t), b.reg.Host+"/providers/acme/hello", "--address", "example.com/acme/hello")
	other := b.config(t, b.reg.Host)
	writeFile(t, filepath.Join(other, "main.tf"), "terraform {\n  required_providers {\n    hello = { source = \"example.com/acme/hello\" }\n  }\n}\n")
	mustOprov(t, env, "install", "-C", other)
	var inv cacheInventory
	decodeJSON(t, mustOprov(t, env, "cache", "-o", "json").Stdout, &inv)
	if len(inv.Temp.Owners) != 1 || !inv.Temp.Owners[0].Live || inv.Temp.Owners[0].PID != slow.Process.Pid || inv.Temp.Cleared.Owners != 0 {
		t.Errorf("'oprov cache' reports the temporary space as %+v, want the slow install's live directory", inv.Temp)
	}
	mustOprov(t, env, "cache", "prune")
	if st, err := os.Stat(partial.path); err != nil || st.Size() < partial.size {
		t.Fatalf("the live download %s was touched by the other runs: %v", partial.path, err)
	}

	relay.Open()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the held install failed once let go: %v\n%s", err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the held install did not finish once let go")
	}
	checkCacheAccounts(t, env, cache)
}

// download is a file being written.
type download struct {
	path string
	size int64
}

// heldDownload finds the partial zip the process pid is writing in its temporary directory of
// the cache.
func heldDownload(t *testing.T, cache string, pid int) download {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(cache, "tmp", ".oprov-tmp-"+strconv.Itoa(pid)+"-*"))
	var found []download
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "blob-*"))
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() > 0 {
				found = append(found, download{f, st.Size()})
			}
		}
	}
	if len(found) == 0 {
		t.Fatalf("no partial download of process %d in %s (owner directories %v)", pid, filepath.Join(cache, "tmp"), dirs)
	}
	return found[0]
}
