package tests

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testca"
)

// staticMirror is Go's http.FileServer over TLS serving a static network mirror of
// examples/hello 1.0.0, laid out as the Provider Network Mirror Protocol says: index.json,
// 1.0.0.json listing the same hashes `oprov serve` lists (zh: and h1:), and the zips beside them.
// (`tofu providers mirror` reads only origin registries, so it is laid out from the zips.)
type staticMirror struct {
	URL    string
	CAFile string
}

func startStaticMirror(tb testing.TB) *staticMirror {
	tb.Helper()
	root := tb.TempDir()
	dir := filepath.Join(root, "example.com", "acme", "hello")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	type archive struct {
		URL    string   `json:"url"`
		Hashes []string `json:"hashes"`
	}
	archives := map[string]archive{}
	for _, p := range helloPlatforms {
		name := "terraform-provider-hello_1.0.0_" + p + ".zip"
		data, err := os.ReadFile(filepath.Join(helloRelease(tb), name))
		if err != nil {
			tb.Fatal(err)
		}
		writeFile(tb, filepath.Join(dir, name), string(data))
		archives[p] = archive{URL: name, Hashes: []string{helloHashes[p].ZH, helloHashes[p].H1}}
	}
	index, _ := json.Marshal(map[string]any{"versions": map[string]any{"1.0.0": map[string]any{}}})
	version, _ := json.Marshal(map[string]any{"archives": archives})
	writeFile(tb, filepath.Join(dir, "index.json"), string(index))
	writeFile(tb, filepath.Join(dir, "1.0.0.json"), string(version))

	addr, caFile := startStaticServe(tb, root)
	return &staticMirror{URL: "https://" + addr + "/", CAFile: caFile}
}

var (
	staticOnce sync.Once
	staticBin  string
	staticErr  error
)

// startStaticServe serves root over HTTPS with a plain static file server (tests/testkit/staticserve,
// built once), under a certificate of a test CA valid for 127.0.0.1 and localhost, and gives the
// address it listens on and the CA's file.
func startStaticServe(tb testing.TB, root string) (addr, caFile string) {
	tb.Helper()
	certDir := tb.TempDir()
	ca := testca.NewCA(tb, certDir)
	certFile, keyFile := ca.Issue(tb, certDir, "127.0.0.1") // also valid for localhost
	staticOnce.Do(func() {
		staticBin = filepath.Join(filepath.Dir(oprovBin), "staticserve")
		build := exec.Command("go", "build", "-o", staticBin, "./tests/testkit/staticserve")
		build.Dir = repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			staticErr = fmt.Errorf("building staticserve: %v\n%s", err, out)
		}
	})
	if staticErr != nil {
		tb.Fatal(staticErr)
	}
	cmd := exec.Command(staticBin, root, certFile, keyFile)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("staticserve printed no address: %v", err)
	}
	return strings.TrimSpace(line), ca.File
}

// parallelDownloads has clients clients, each on its own connection, download path below base
// each times, and gives the time taken; a failed or short download ends the benchmark.
func parallelDownloads(b *testing.B, base, caFile, path string, size int64, clients, each int) time.Duration {
	b.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cs := make([]*http.Client, clients)
	for i := range cs { // connections made before the clock starts: the transfer is measured
		cs[i] = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
		resp, err := cs[i].Get(base + "healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				resp, err := c.Get(base + path)
				if err != nil {
					errs <- err
					return
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || n != size {
					errs <- fmt.Errorf("%d, %d of %d bytes, %v", resp.StatusCode, n, size, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatalf("download: %v", err)
	}
	return took
}

// BenchmarkServeVsStatic measures, side by side in one run and alternating, `oprov serve` (warm
// cache) against Go's http.FileServer over TLS serving a static mirror of the same release:
// archive throughput with 100 parallel clients, and `tofu init` through each as a network mirror.
func BenchmarkServeVsStatic(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	_, args := helloInRegistry(b)
	s := startServe(b, nil, false, args...)
	st := startStaticMirror(b)
	host := helloPlatforms[0]
	archive := helloArchive("1.0.0", host)
	size := fileSize(b, filepath.Join(helloRelease(b), "terraform-provider-hello_1.0.0_"+host+".zip"))
	smoke := benchMB() < 10
	clients, each, rounds := 100, 3, max(b.N, 5)
	if smoke {
		clients, each, rounds = 10, 1, 1
	}
	// Warm the server: the tag resolved, the zip cached and checked, the h1: computed.
	if code, _, _ := s.get(b, helloPath+"1.0.0.json"); code != 200 {
		b.Fatalf("warming VERSION.json: %d", code)
	}
	parallelDownloads(b, s.URL, s.CAFile, archive, size, 1, 1)

	work := b.TempDir()
	rc := func(name, url string) string {
		p := filepath.Join(work, name+".tfrc")
		writeFile(b, p, "provider_installation {\n  network_mirror {\n    url = \""+url+"\"\n  }\n}\n")
		return p
	}
	rcs := map[string][]string{
		"serve":  {"TF_CLI_CONFIG_FILE=" + rc("serve", s.URL), "SSL_CERT_FILE=" + s.CAFile, "HOME=" + work, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"},
		"static": {"TF_CLI_CONFIG_FILE=" + rc("static", st.URL), "SSL_CERT_FILE=" + st.CAFile, "HOME=" + work, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"},
	}
	fresh := func() string {
		dir := b.TempDir()
		writeFile(b, filepath.Join(dir, "main.tf"), helloConfig)
		return dir
	}
	timeCmdIn(b, fresh(), rcs["static"], tofu, "init", "-input=false") // warm the page cache

	dl := map[string][]time.Duration{}
	inits := map[string][]time.Duration{}
	b.ResetTimer()
	for range rounds {
		dl["serve"] = append(dl["serve"], parallelDownloads(b, s.URL, s.CAFile, archive, size, clients, each))
		dl["static"] = append(dl["static"], parallelDownloads(b, st.URL, st.CAFile, archive, size, clients, each))
		for _, name := range []string{"serve", "static"} {
			inits[name] = append(inits[name], timeCmdIn(b, fresh(), rcs[name], tofu, "init", "-input=false"))
		}
	}
	b.StopTimer()
	total := float64(size) * float64(clients*each)
	mbs := func(name string) float64 { return total / median(dl[name]).Seconds() / 1e6 }
	tput := mbs("serve") / mbs("static")
	initRatio := float64(median(inits["serve"])) / float64(median(inits["static"]))
	b.ReportMetric(tput, "x-static-throughput")
	b.ReportMetric(initRatio, "x-static-init")
	fmt.Printf("\noprov serve vs http.FileServer over TLS (a static mirror of the same release), %d rounds (median):\n", rounds)
	fmt.Printf("  archives, %d parallel clients x %d x %.1f MB: serve %6.0f MB/s, static %6.0f MB/s, ratio serve/static %.2fx (target >= 0.95x)\n",
		clients, each, float64(size)/1e6, mbs("serve"), mbs("static"), tput)
	fmt.Printf("  tofu init through a network mirror: serve %s, static %s, ratio serve/static %.2fx (target <= 1.05x)\n",
		median(inits["serve"]).Round(time.Millisecond), median(inits["static"]).Round(time.Millisecond), initRatio)
}

// BenchmarkServeFleetRSS runs the fleet scenario (three replicas behind HAProxy, tofu inits and
// archive downloads at once, SIGTERM to one) and reports a replica's peak RSS.
func BenchmarkServeFleetRSS(b *testing.B) {
	inits, downloads := 30, 300
	if benchMB() < 10 {
		inits, downloads = 3, 30
	}
	var peak float64
	for range b.N {
		peak = max(peak, runFleet(b, inits, downloads))
	}
	b.ReportMetric(peak, "MiB-peak-rss")
	fmt.Printf("  peak RSS of a replica under the fleet test (%d tofu inits, %d downloads): %.1f MiB\n", inits, downloads, peak)
}
