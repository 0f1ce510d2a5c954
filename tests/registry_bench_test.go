package tests

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// staticRegistryFrom lays out, for Go's http.FileServer over TLS (staticserve), a static Provider
// Registry Protocol answering for the same provider as a running serve's registry: discovery,
// versions, every platform's download answer, SHA256SUMS, its signature and the zips, each the
// bytes serve gave, under the same paths (so the answers' URLs hold). It gives the static server's
// base URL and CA.
func staticRegistryFrom(b *testing.B, rs *registryServe) (string, string) {
	b.Helper()
	root := b.TempDir()
	copyPath := func(path string) []byte {
		code, _, body := rs.get(b, path)
		if code != 200 {
			b.Fatalf("GET %s from serve: %d %s", path, code, body)
		}
		writeFile(b, filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path, "/"))), string(body))
		return body
	}
	writeFile(b, filepath.Join(root, ".well-known", "terraform.json"), `{"providers.v1":"/v1/providers/`+rs.host+`/"}`)
	base := "/v1/providers/" + rs.host + "/acme/hello/"
	copyPath(base + "versions")
	for _, p := range helloPlatforms {
		goos, arch, _ := strings.Cut(p, "_")
		var d struct {
			DownloadURL string `json:"download_url"`
			SumsURL     string `json:"shasums_url"`
			SigURL      string `json:"shasums_signature_url"`
		}
		if err := json.Unmarshal(copyPath(base+"1.0.0/download/"+goos+"/"+arch), &d); err != nil {
			b.Fatal(err)
		}
		copyPath(d.DownloadURL)
		copyPath(d.SumsURL)
		copyPath(d.SigURL)
	}
	addr, caFile := startStaticServe(b, root)
	_, port, _ := strings.Cut(addr, ":")
	return "https://localhost:" + port + "/", caFile
}

// BenchmarkServeRegistryVsStatic measures, alternating in one run, plain `tofu init` (no CLI
// configuration, the provider's source on the server's hostname) through serve's provider
// registry (warm: the version checked, SHA256SUMS signed, the zips cached) against the same
// answers precomputed on a static file server over TLS; and 100 parallel clients' versions and
// download requests against each.
func BenchmarkServeRegistryVsStatic(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	reg := testreg.Start(b, testreg.Options{})
	keys := b.TempDir()
	pass := []string{"COSIGN_PASSWORD=test-password"}
	mustOprov(b, pass, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	pushJSON(b, nil, helloRelease(b), reg.Host+"/providers/acme/hello", "--ca-file", reg.CAFile, "--address", "example.com/acme/hello")
	mustOprov(b, pass, "sign", reg.Host+"/providers/acme/hello:1.0.0", "--key", filepath.Join(keys, "cosign.key"), "--ca-file", reg.CAFile)
	signingKey, keyID := gpgSigningKey(b)
	port := freePort(b)
	rs := &registryServe{host: fmt.Sprintf("localhost:%d", port), cache: filepath.Join(b.TempDir(), "cache"), keyID: keyID}
	rs.served = startServe(b, nil, false, reg.Host+"/providers/${namespace}/${type}", "--ca-file", reg.CAFile, "--cache-dir", rs.cache,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--url", "https://"+rs.host+"/",
		"--key", filepath.Join(keys, "cosign.pub"), "--signing-key", signingKey)
	staticURL, staticCA := staticRegistryFrom(b, rs) // also warms serve: every answer given once

	work := b.TempDir()
	hosts := map[string]string{"serve": rs.host, "static": strings.TrimSuffix(strings.TrimPrefix(staticURL, "https://"), "/")}
	cas := map[string]string{"serve": rs.CAFile, "static": staticCA}
	env := func(name string) []string {
		return []string{"SSL_CERT_FILE=" + cas[name], "HOME=" + work, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=", "TF_PLUGIN_CACHE_DIR="}
	}
	fresh := func(name string) string {
		dir := b.TempDir()
		writeFile(b, filepath.Join(dir, "main.tf"), strings.Replace(helloConfig, `"example.com/acme/hello"`, `"`+hosts[name]+`/acme/hello"`, 1))
		return dir
	}
	timeCmdIn(b, fresh("static"), env("static"), tofu, "init", "-input=false") // warm the page cache
	timeCmdIn(b, fresh("serve"), env("serve"), tofu, "init", "-input=false")

	versions := "v1/providers/" + rs.host + "/acme/hello/versions"
	download := "v1/providers/" + rs.host + "/acme/hello/1.0.0/download/linux/amd64"
	sizes := map[string]int64{}
	for _, p := range []string{versions, download} {
		_, _, body := rs.get(b, p)
		sizes[p] = int64(len(body))
	}
	bases := map[string]string{"serve": rs.URL, "static": staticURL}
	clients, each, rounds := 100, 10, max(b.N, 11)
	if benchMB() < 10 {
		clients, each, rounds = 10, 1, 1
	}
	inits := map[string][]time.Duration{}
	api := map[string][]time.Duration{}
	b.ResetTimer()
	for range rounds {
		for _, name := range []string{"serve", "static"} {
			inits[name] = append(inits[name], timeCmdIn(b, fresh(name), env(name), tofu, "init", "-input=false"))
			api[name] = append(api[name], parallelRequests(b, bases[name], cas[name], []string{versions, download}, sizes, clients, each))
		}
	}
	b.StopTimer()
	initRatio := float64(median(inits["serve"])) / float64(median(inits["static"]))
	apiRatio := float64(median(api["serve"])) / float64(median(api["static"]))
	b.ReportMetric(initRatio, "x-static-init")
	b.ReportMetric(apiRatio, "x-static-api-time")
	fmt.Printf("\noprov serve's provider registry vs the same answers on http.FileServer over TLS, %d rounds (median):\n", rounds)
	fmt.Printf("  plain tofu init (signature checked): serve %s, static %s, ratio serve/static %.2fx (target <= 1.1x)\n",
		median(inits["serve"]).Round(time.Millisecond), median(inits["static"]).Round(time.Millisecond), initRatio)
	fmt.Printf("  versions + download, %d parallel clients x %d each: serve %s, static %s, ratio serve/static %.2fx\n",
		clients, each, median(api["serve"]).Round(time.Millisecond), median(api["static"]).Round(time.Millisecond), apiRatio)
}

// parallelRequests has clients clients, each on its own connection (made before the clock
// starts), GET every path in turn each times, checking each answer's status and size, and gives
// the time taken; the connections are closed after.
func parallelRequests(b *testing.B, base, caFile string, paths []string, sizes map[string]int64, clients, each int) time.Duration {
	b.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cs := make([]*http.Client, clients)
	for i := range cs {
		cs[i] = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
		if resp, err := cs[i].Get(base + "healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	defer func() {
		for _, c := range cs {
			c.CloseIdleConnections()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				for _, p := range paths {
					resp, err := c.Get(base + p)
					if err != nil {
						errs <- err
						return
					}
					n, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 || n != sizes[p] {
						errs <- fmt.Errorf("%s: %d, %d of %d bytes, %v", p, resp.StatusCode, n, sizes[p], err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatalf("request: %v", err)
	}
	return took
}
