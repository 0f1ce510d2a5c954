package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"
)

// checkCache fails the test if the cache holds anything partial: every blob must hash to its
// name, every version record must parse, and every mirror entry must be a whole package whose
// h1: the lock records. Temporary files may remain only under tmp/.
func checkCache(t *testing.T, cache string, lockH1 []string) {
	t.Helper()
	blobs, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*"))
	for _, b := range blobs {
		f, err := os.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		io.Copy(h, f)
		f.Close()
		if hex.EncodeToString(h.Sum(nil)) != filepath.Base(b) {
			t.Errorf("partial or corrupt blob in the cache: %s", b)
		}
	}
	filepath.WalkDir(filepath.Join(cache, "versions"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(p)
		var v map[string]any
		if !strings.HasSuffix(p, ".json") || json.Unmarshal(data, &v) != nil {
			t.Errorf("partial version record in the cache: %s", p)
		}
		return nil
	})
	roots, _ := os.ReadDir(filepath.Join(cache, "mirror"))
	for _, r := range roots {
		// mirror/<hex>/HOST/NS/TYPE/VERSION/OS_ARCH
		pkgs, _ := filepath.Glob(filepath.Join(cache, "mirror", r.Name(), "*", "*", "*", "*", "*"))
		if len(pkgs) != 1 {
			t.Errorf("mirror entry %s holds %d packages, want 1: %v", r.Name(), len(pkgs), pkgs)
			continue
		}
		h1, err := dirhash.HashDir(pkgs[0], "", dirhash.Hash1)
		if err != nil || !contains(lockH1, h1) {
			t.Errorf("partial mirror entry %s (h1 %s, %v)", pkgs[0], h1, err)
		}
	}
}

// seededRand gives a random source whose seed the test log shows, to replay a failure.
func seededRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("OPROV_TEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (replay with OPROV_TEST_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, 1))
}

// killRuns runs oprov n times with args, killing each run with SIGKILL at a random point in the
// first 1.2x of full (how long a whole run takes). prepare runs before each run, check after
// each. It gives how many runs were killed before they finished.
func killRuns(t *testing.T, rng *rand.Rand, n int, full time.Duration, env []string, prepare, check func(), args ...string) int {
	t.Helper()
	killed := 0
	for i := 0; i < n; i++ {
		prepare()
		cmd := exec.Command(oprovBin, args...)
		cmd.Env = append(os.Environ(), env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(full) * 12 / 10)))
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			killed++
		}
		check()
	}
	t.Logf("%d of %d runs were killed before they finished", killed, n)
	return killed
}

// TestInstallSurvivesSIGKILL: 20 installs killed at random points never leave a partial cache
// entry, and the next install completes.
func TestInstallSurvivesSIGKILL(t *testing.T) {
	f := newLoaderFixture(t, helloConfig)
	env := append(append([]string{}, f.env...), "OPROV_CACHE_DIR="+filepath.Join(t.TempDir(), "lockcache"))
	mustOprov(t, env, "lock", "-C", f.cfg)
	var lockH1 []string
	for _, h := range lockHashes(t, filepath.Join(f.cfg, ".terraform.lock.hcl"), "example.com/acme/hello") {
		if strings.HasPrefix(h, "h1:") {
			lockH1 = append(lockH1, h)
		}
	}
	cache := filepath.Join(t.TempDir(), "cache")
	runEnv := append(append([]string{}, f.env...), "OPROV_CACHE_DIR="+cache)

	// How long a cold install takes, to spread the kills over it.
	scratch := append(append([]string{}, f.env...), "OPROV_CACHE_DIR="+filepath.Join(t.TempDir(), "scratch"))
	start := time.Now()
	mustOprov(t, scratch, "install", "-C", f.cfg)
	full := time.Since(start)

	rng := seededRand(t)
	t.Logf("a cold install takes %v", full)
	killRuns(t, rng, 20, full, runEnv, func() {
		// Take away part of the cache so each run has work to do.
		for _, sub := range []string{"blobs", "mirror", "versions"} {
			if rng.IntN(2) == 0 {
				os.RemoveAll(filepath.Join(cache, sub))
			}
		}
	}, func() { checkCache(t, cache, lockH1) }, "install", "-C", f.cfg)
	mustOprov(t, runEnv, "install", "-C", f.cfg)
	checkCache(t, cache, lockH1)
	if n := countEntries(t, filepath.Join(cache, "mirror")); n != 1 {
		t.Errorf("after the final install the mirror holds %d entries, want 1", n)
	}
}

// TestConcurrentInstalls: 8 installs at once on one empty cache all succeed and leave it whole.
func TestConcurrentInstalls(t *testing.T) {
	f := newLoaderFixture(t, helloConfig)
	cache := filepath.Join(t.TempDir(), "cache")
	env := append(append([]string{}, f.env...), "OPROV_CACHE_DIR="+cache)
	var wg sync.WaitGroup
	results := make([]result, 8)
	dirs := make([]string, 8)
	for i := range results {
		dirs[i] = f.freshCopy(t) // no lock yet: each run locks (from the index's h1:) and installs
	}
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = oprov(t, env, "install", "-C", dirs[i])
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.Code != 0 {
			t.Errorf("install %d: exit %d: %s", i, r.Code, r.Stderr)
		}
	}
	var lockH1 []string
	for _, h := range lockHashes(t, filepath.Join(dirs[0], ".terraform.lock.hcl"), "example.com/acme/hello") {
		if strings.HasPrefix(h, "h1:") {
			lockH1 = append(lockH1, h)
		}
	}
	checkCache(t, cache, lockH1)
	blobs, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*"))
	if len(blobs) != 1 {
		t.Errorf("the cache holds %d zips, want only this machine's", len(blobs))
	}
}
