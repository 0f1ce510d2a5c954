package tests

import (
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// TestServeMetricsPromtool: a scrape taken while 100 archive downloads and 200 document requests
// run passes `promtool check metrics` (Prometheus' own linter: help texts, types, units, naming),
// and histogram_quantile over the scraped le buckets gives a sane p99 for archives.
func TestServeMetricsPromtool(t *testing.T) {
	promtool := peers.Require(t, "promtool")
	_, args := helloInRegistry(t)
	s := startServe(t, nil, false, args...)
	var wg sync.WaitGroup
	scraped := make(chan []byte, 1)
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := caClient(t, s.CAFile)
			path := helloArchive("1.0.0", helloPlatforms[i%len(helloPlatforms)])
			if i >= 100 {
				path = helloPath + []string{"index.json", "1.0.0.json"}[i%2]
			}
			if code, _, err := getWith(c, s.URL, path); err != nil || code != 200 {
				t.Errorf("GET %s: %d %v", path, code, err)
			}
		}()
		if i == 150 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, body := s.get(t, "/metrics")
				scraped <- body
			}()
		}
	}
	wg.Wait()
	under := <-scraped
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(under)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("promtool check metrics on a scrape under load: %v\n%s\n--- scrape:\n%s", err, out, under)
	}
	_, _, final := s.get(t, "/metrics")
	p50 := histogramQuantile(t, final, "oprov_serve_request_duration_seconds", `route="archive"`, 0.5)
	p99 := histogramQuantile(t, final, "oprov_serve_request_duration_seconds", `route="archive"`, 0.99)
	fmt.Printf("\narchive request duration from the scraped buckets: p50 %.3fs, p99 %.3fs\n", p50, p99)
	if !(p99 > 0 && p99 < 60 && p99 >= p50) {
		t.Errorf("histogram_quantile: p50 %v, p99 %v: not sane", p50, p99)
	}
}

// histogramQuantile is Prometheus' histogram_quantile over one series' le buckets in a scrape:
// the bucket holding the rank, with linear interpolation inside it.
func histogramQuantile(t *testing.T, scrape []byte, name, labels string, q float64) float64 {
	t.Helper()
	type bucket struct{ le, n float64 }
	var bs []bucket
	for _, l := range strings.Split(string(scrape), "\n") {
		if !strings.HasPrefix(l, name+"_bucket{"+labels+",le=\"") {
			continue
		}
		rest := strings.TrimPrefix(l, name+"_bucket{"+labels+",le=\"")
		leS, val, _ := strings.Cut(rest, "\"} ")
		le := math.Inf(1)
		if leS != "+Inf" {
			le, _ = strconv.ParseFloat(leS, 64)
		}
		n, _ := strconv.ParseFloat(val, 64)
		bs = append(bs, bucket{le, n})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) < 2 || !math.IsInf(bs[len(bs)-1].le, 1) {
		t.Fatalf("no le buckets for %s{%s} in the scrape", name, labels)
	}
	total := bs[len(bs)-1].n
	rank := q * total
	for i, b := range bs {
		if b.n >= rank {
			if math.IsInf(b.le, 1) {
				return bs[i-1].le
			}
			lo, below := 0.0, 0.0
			if i > 0 {
				lo, below = bs[i-1].le, bs[i-1].n
			}
			if b.n == below {
				return b.le
			}
			return lo + (b.le-lo)*(rank-below)/(b.n-below)
		}
	}
	return math.NaN()
}
