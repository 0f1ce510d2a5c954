package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
	"github.com/oprov/oprov/tests/testkit/throttle"
)

// TestServeEnforcesPolicy: with --key, an unsigned version is not listed and its archive is a 404
// whose reason is in the log; the signed version is listed and served, and tofu, which checks no
// signature itself, installs the signed one although a higher unsigned one exists.
func TestServeEnforcesPolicy(t *testing.T) {
	reg := testreg.Start(t, testreg.Options{})
	keys := t.TempDir()
	env := []string{"COSIGN_PASSWORD=test"}
	mustOprov(t, env, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	repo := reg.Host + "/providers/acme/hello"
	pushJSON(t, env, helloRelease(t), repo, "--ca-file", reg.CAFile, "--address", "example.com/acme/hello", "--sign", "--key", filepath.Join(keys, "cosign.key"))
	unsigned := versionedHello(t, reg, "providers/acme/hello", "1.1.0")
	s := startServe(t, nil, false, append(serveFromRegistry(t, reg.Host, reg.CAFile), "--key", filepath.Join(keys, "cosign.pub"))...)

	code, _, body := s.get(t, helloPath+"index.json")
	if code != 200 || string(body) != `{"versions":{"1.0.0":{}}}` {
		t.Errorf("index.json under the policy: %d %s, want only 1.0.0", code, body)
	}
	if l := s.logLines(helloPath + "index.json"); len(l) != 1 || !strings.Contains(l[0], `"hidden":[{"version":"1.1.0"`) || !strings.Contains(l[0], "not signed") {
		t.Errorf("the index.json log line does not say 1.1.0 was hidden and why: %v", l)
	}
	host := helloPlatforms[0]
	path := helloArchive("1.1.0", host)
	if code, _, _ := s.get(t, path); code != 404 {
		t.Errorf("unsigned archive: %d, want 404", code)
	}
	if l := s.logLines(path); len(l) != 1 || !strings.Contains(l[0], `"status":404`) || !strings.Contains(l[0], `"refused":"policy"`) ||
		!strings.Contains(l[0], unsigned) || !strings.Contains(l[0], "not signed") {
		t.Errorf("the log does not give the reason for the 404: %v", l)
	}
	if code, sum, _ := s.get(t, helloArchive("1.0.0", host)); code != 200 || "zh:"+sum != helloHashes[host].ZH {
		t.Errorf("signed archive: %d, sha256 %s, want 200 and %s", code, sum, helloHashes[host].ZH)
	}
	tofu := peers.Require(t, "tofu")
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "rc"), s.CLIConfig)
	cfg := filepath.Join(work, "cfg")
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(helloConfig, `"~> 1.0"`, `">= 1.0"`, 1))
	mustTofu(t, tofu, cfg, []string{"TF_CLI_CONFIG_FILE=" + filepath.Join(work, "rc"), "SSL_CERT_FILE=" + s.CAFile, "HOME=" + work}, "init", "-input=false")
	if data, _ := os.ReadFile(filepath.Join(cfg, ".terraform.lock.hcl")); !strings.Contains(string(data), `version     = "1.0.0"`) {
		t.Errorf("tofu did not lock the signed 1.0.0:\n%s", data)
	}
}

// TestServeTamperedBlob: a zip changed in the registry's storage is never served: the client gets
// a 502, the log names the digest mismatch, the cache stays clean, and tofu init fails.
func TestServeTamperedBlob(t *testing.T) {
	reg, args := helloInRegistry(t)
	host := helloPlatforms[0]
	hex := strings.TrimPrefix(helloHashes[host].ZH, "zh:")
	blob := reg.BlobPath(hex)
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x55 // same size, other bytes
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := args[len(args)-1]
	s := startServe(t, nil, false, args...)
	path := helloArchive("1.0.0", host)
	code, _, body := s.get(t, path)
	if code != 502 || strings.HasPrefix(string(body), "PK") {
		t.Errorf("tampered archive: %d with %d bytes, want a 502 without the zip", code, len(body))
	}
	if l := s.logLines(path); len(l) != 1 || !strings.Contains(l[0], "does not match its digest sha256:"+hex) || !strings.Contains(l[0], `"refused":"digest"`) {
		t.Errorf("the log does not name the digest mismatch: %v", l)
	}
	if _, err := os.Stat(filepath.Join(cache, "blobs", "sha256", hex)); err == nil {
		t.Error("the tampered zip is in the cache")
	}
	checkCache(t, cache, nil)
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "rc"), s.CLIConfig)
	writeFile(t, filepath.Join(work, "cfg", "main.tf"), helloConfig)
	out, err := tofuRun(t, peers.Require(t, "tofu"), filepath.Join(work, "cfg"), []string{"TF_CLI_CONFIG_FILE=" + filepath.Join(work, "rc"), "SSL_CERT_FILE=" + s.CAFile, "HOME=" + work}, "init", "-input=false")
	if err == nil {
		t.Errorf("tofu init succeeded from a tampered registry:\n%s", out)
	}
}

// TestServeLoad: 200 concurrent downloads of one archive (cold cache: one fetch from the
// registry, shared) over 200 connections all succeed; the server's peak RSS is reported.
func TestServeLoad(t *testing.T) {
	_, args := helloInRegistry(t)
	s := startServe(t, nil, true, args...)
	host := helloPlatforms[0]
	const n = 200
	errs := make(chan string, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := caClient(t, s.CAFile) // a client (and connection) each, as 200 machines would
			if code, sum, err := getWith(c, s.URL, helloArchive("1.0.0", host)); err != nil || code != 200 || "zh:"+sum != helloHashes[host].ZH {
				errs <- fmt.Sprintf("status %d, sha256 %s, %v", code, sum, err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	failed := 0
	for e := range errs {
		if failed++; failed <= 3 {
			t.Error(e)
		}
	}
	_, _, metrics := s.get(t, "/metrics")
	fetched := metricValue(string(metrics), "oprov_serve_registry_bytes_total")
	if code := s.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d after SIGTERM", code)
	}
	rss := s.peakRSS(t)
	fmt.Printf("\nserve load: %d concurrent archive downloads, %d failed, %s, peak RSS %.1f MiB (target < 100 MiB); fetched from the registry %.0f bytes\n",
		n, failed, elapsed.Round(time.Millisecond), rss, fetched)
	if size := fileSize(t, filepath.Join(helloRelease(t), "terraform-provider-hello_1.0.0_"+host+".zip")); fetched != float64(size) {
		t.Errorf("the server fetched %.0f bytes from the registry for 200 downloads of one %d-byte zip: want it fetched once", fetched, size)
	}
}

// TestServeSurvivesSIGKILL: a server killed while it fetches a zip into its cache leaves no
// partial entry, and a restarted one serves the zip.
func TestServeSurvivesSIGKILL(t *testing.T) {
	s, proxy, cache, args := slowRegistryServer(t)
	host := helloPlatforms[0]
	hex := strings.TrimPrefix(helloHashes[host].ZH, "zh:")
	got := make(chan error, 1)
	go func() { _, _, err := getWith(s.client, s.URL, helloArchive("1.0.0", host)); got <- err }()
	waitForPartialBlob(t, cache)
	s.stop(t, syscall.SIGKILL)
	<-got
	if _, err := os.Stat(filepath.Join(cache, "blobs", "sha256", hex)); err == nil {
		t.Fatal("a zip killed half-way is in the cache")
	}
	checkCache(t, cache, nil)

	proxy.SetRate(0)
	s2 := startServe(t, nil, false, args...)
	if code, sum, _ := s2.get(t, helloArchive("1.0.0", host)); code != 200 || "zh:"+sum != helloHashes[host].ZH {
		t.Errorf("after a restart: %d, sha256 %s, want 200 and %s\n%s", code, sum, helloHashes[host].ZH, s2.logText())
	}
	checkCache(t, cache, nil)
	if _, err := os.Stat(filepath.Join(cache, "blobs", "sha256", hex)); err != nil {
		t.Errorf("the restarted server did not cache the zip: %v", err)
	}
}

// TestServeDrainsOnSIGTERM: SIGTERM while a download is under way stops new connections at once
// and lets the download finish, whole; then the server exits 0.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	s, _, cache, _ := slowRegistryServer(t)
	host := helloPlatforms[0]
	type answer struct {
		code int
		sum  string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		c, sum, err := getWith(s.client, s.URL, helloArchive("1.0.0", host))
		got <- answer{c, sum, err}
	}()
	waitForPartialBlob(t, cache)
	s.cmd.Process.Signal(syscall.SIGTERM)
	waitForLog(t, s, "shutting down")
	if c, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(s.URL, "https://"), "/"), 5*time.Second); err == nil {
		c.Close()
		t.Error("the server still accepts connections after SIGTERM")
	}
	a := <-got
	if a.err != nil || a.code != 200 || "zh:"+a.sum != helloHashes[host].ZH {
		t.Errorf("the download under way at SIGTERM: %d, sha256 %s, %v; want it whole", a.code, a.sum, a.err)
	}
	if code := s.wait(t); code != 0 {
		t.Errorf("serve exited %d", code)
	}
	if !strings.Contains(s.logText(), "stopped: every request finished") {
		t.Errorf("the log does not say the drain finished:\n%s", s.logText())
	}
}

// slowRegistryServer starts a registry holding hello and a server that reads it through a proxy
// sending 1 MiB/s, so that a fetch into the cache takes seconds. It gives the server, the proxy,
// the cache directory and the serve arguments.
func slowRegistryServer(t *testing.T) (*served, *throttle.Proxy, string, []string) {
	t.Helper()
	reg := testreg.Start(t, testreg.Options{})
	pushJSON(t, nil, helloRelease(t), reg.Host+"/providers/acme/hello", "--ca-file", reg.CAFile, "--address", "example.com/acme/hello")
	proxy := throttle.Start(t, reg.Host, 1<<20)
	args := serveFromRegistry(t, proxy.Addr, reg.CAFile)
	return startServe(t, nil, false, args...), proxy, args[len(args)-1], args
}

// waitForPartialBlob waits until a zip is being written into the cache (some bytes are there): a
// fetch is under way.
func waitForPartialBlob(t *testing.T, cache string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// Writers keep their temporary files in an owned directory under tmp/ (internal/scratch).
		tmps, _ := filepath.Glob(filepath.Join(cache, "tmp", "*", "blob-*"))
		blobs, _ := filepath.Glob(filepath.Join(cache, "blobs", "sha256", "*")) // where a careless fetch would write
		for _, p := range append(tmps, blobs...) {
			if st, err := os.Stat(p); err == nil && st.Size() > 0 {
				return
			}
		}
	}
	t.Fatal("no fetch into the cache started within a minute")
}

func waitForLog(t *testing.T, s *served, text string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(s.logText(), text) {
			return
		}
	}
	t.Fatalf("the log never said %q:\n%s", text, s.logText())
}

// getWith fetches a path below base with a client and gives the status and the body's sha256.
func getWith(c *http.Client, base, path string) (int, string, error) {
	resp, err := c.Get(base + strings.TrimPrefix(path, "/"))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return resp.StatusCode, "", err
	}
	return resp.StatusCode, hex.EncodeToString(h.Sum(nil)), nil
}

// metricValue reads an unlabelled metric from Prometheus's text format.
func metricValue(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestServeClientLeavingDoesNotPoison: a client that leaves while the server is asking the
// registry does not leave an error behind for the next client (what a generation learns is
// shared, so the work runs on).
func TestServeClientLeavingDoesNotPoison(t *testing.T) {
	s, proxy, _, _ := slowRegistryServer(t)
	proxy.SetRate(512) // bytes per second: even the registry's small answers take a while
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+strings.TrimPrefix(helloPath, "/")+"index.json", nil)
	left := make(chan struct{})
	go func() {
		defer close(left)
		if resp, err := s.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, _, m := s.get(t, "/metrics"); metricValue(string(m), "oprov_serve_registry_calls_in_flight") >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never called the registry")
		}
	}
	cancel()
	<-left
	proxy.SetRate(0)
	if code, _, body := s.get(t, helloPath+"index.json"); code != 200 || string(body) != `{"versions":{"1.0.0":{}}}` {
		t.Errorf("the next client got %d %s\n%s", code, body, s.logText())
	}
}
