package serve

import (
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape reads GET /metrics into series name (with labels) -> value.
func scrape(t *testing.T, s *testServer) map[string]float64 {
	t.Helper()
	code, body := s.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(body), "\n") {
		i := strings.LastIndexByte(l, ' ')
		if l == "" || strings.HasPrefix(l, "#") || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// TestMetrics: after requests, /metrics counts them by route and code, times them in the
// histogram (its _count), counts cache misses and hits and refusals, and carries the Go runtime's
// and the process's metrics; a second server in the same process counts only its own requests.
func TestMetrics(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": false})
	s, other := f.server(t, nil, time.Minute), f.server(t, nil, time.Minute)
	zip := base + "terraform-provider-hello_1.0.0_linux_amd64.zip"
	for path, want := range map[string]int{base + "index.json": 200, base + "9.9.9.json": 404} {
		if code, body := s.get(t, path); code != want {
			t.Fatalf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
	for range 2 {
		if code, body := s.get(t, zip); code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", zip, code, body)
		}
	}
	got := scrape(t, s)
	for name, want := range map[string]float64{
		`oprov_serve_requests_total{route="index",code="200"}`:        1,
		`oprov_serve_requests_total{route="version",code="404"}`:      1,
		`oprov_serve_requests_total{route="archive",code="200"}`:      2,
		`oprov_serve_request_duration_seconds_count{route="archive"}`: 2,
		`oprov_serve_request_duration_seconds_count{route="index"}`:   1,
		`oprov_serve_archive_cache_total{result="miss"}`:              1,
		`oprov_serve_archive_cache_total{result="hit"}`:               1,
		`oprov_serve_refused_total{reason="not_found"}`:               1,
		`oprov_serve_requests_in_flight`:                              1, // the scrape itself
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if got["oprov_serve_archive_bytes_total"] <= 0 || got["oprov_serve_registry_bytes_total"] <= 0 {
		t.Errorf("archive bytes %v, registry bytes %v: want both > 0",
			got["oprov_serve_archive_bytes_total"], got["oprov_serve_registry_bytes_total"])
	}
	want := []string{"go_memstats_alloc_bytes"}
	if runtime.GOOS == "linux" || runtime.GOOS == "windows" { // the library has process metrics for these only
		want = append(want, "process_resident_memory_bytes", "process_open_fds")
	}
	for _, name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if v, ok := scrape(t, other)[`oprov_serve_requests_total{route="index",code="200"}`]; ok {
		t.Errorf("the other server counts %v index requests, want none", v)
	}
}

// TestSeries: label values are quoted as Prometheus' text format reads them, and the library
// takes the name.
func TestSeries(t *testing.T) {
	got := series("m", "a", "x", "b", "q\"b\\s\nn")
	if want := `m{a="x",b="q\"b\\s\nn"}`; got != want {
		t.Fatalf("series = %s, want %s", got, want)
	}
	if got := series("m"); got != "m" {
		t.Fatalf("series without labels = %s, want m", got)
	}
	newMetrics().set.GetOrCreateCounter(got).Inc() // panics on a name it cannot read
}

// TestExposition: every family has a # HELP line with a text and a # TYPE line before its
// samples, and the duration histogram's le buckets are cumulative, end at +Inf and agree with
// _count.
func TestExposition(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": false})
	s := f.server(t, nil, time.Minute)
	for range 3 {
		s.get(t, base+"index.json")
	}
	_, body := s.get(t, "/metrics")
	help, typ := map[string]string{}, map[string]string{}
	var last float64
	buckets := 0
	for _, l := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if rest, ok := strings.CutPrefix(l, "# HELP "); ok {
			name, text, _ := strings.Cut(rest, " ")
			help[name] = text
			continue
		}
		if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, tp, _ := strings.Cut(rest, " ")
			typ[name] = tp
			continue
		}
		name := l[:strings.IndexAny(l, "{ ")]
		fam := name
		if typ[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")] == "histogram" {
			fam = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		}
		if len(help[fam]) < 10 || typ[fam] == "" {
			t.Errorf("%s: no help text or type before it (help %q, type %q)", l, help[fam], typ[fam])
		}
		v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		switch {
		case strings.HasPrefix(l, `oprov_serve_request_duration_seconds_bucket{route="index"`):
			if v < last {
				t.Errorf("buckets not cumulative at %s", l)
			}
			last = v
			buckets++
			if strings.Contains(l, `le="+Inf"`) && v != 3 {
				t.Errorf("+Inf bucket %v, want 3", v)
			}
		case strings.HasPrefix(l, `oprov_serve_request_duration_seconds_count{route="index"}`) && v != last:
			t.Errorf("_count %v, +Inf bucket %v", v, last)
		}
	}
	if buckets != len(durationBuckets)+1 {
		t.Errorf("%d buckets for the index route, want %d", buckets, len(durationBuckets)+1)
	}
	if strings.Contains(string(body), "vmrange") {
		t.Error("vmrange buckets in the exposition")
	}
}
