package serve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	vm "github.com/VictoriaMetrics/metrics"
)

// The exposition follows Prometheus' conventions: every family has a # HELP line with a real text
// and a # TYPE line, names carry base units (seconds, bytes), and the duration histogram has
// cumulative le buckets, so histogram_quantile and the usual dashboards work. VictoriaMetrics'
// library keeps the counters and gauges and reads the process's and the runtime's figures; its
// metadata lines carry no help text and its histograms have vmrange buckets, so the text is
// written here, from the families below (those the library writes that are not listed are left
// out).

type family struct {
	typ, help string
}

var families = map[string]family{
	"oprov_serve_requests_total":               {"counter", "Requests answered, by route (index, version, archive, healthz, metrics, other) and HTTP status code."},
	"oprov_serve_request_duration_seconds":     {"histogram", "Time from a request's headers to the end of its response, in seconds, by route."},
	"oprov_serve_requests_in_flight":           {"gauge", "Requests being answered now."},
	"oprov_serve_archive_bytes_total":          {"counter", "Bytes of archives sent to clients."},
	"oprov_serve_archive_cache_total":          {"counter", "Archives needed, by result: hit (in the cache) or miss (fetched from the registry first)."},
	"oprov_serve_refused_total":                {"counter", "Versions, archives or requests refused, by reason (policy, not_found, digest, h1, registry, too_large, busy, path_too_long, body_on_get)."},
	"oprov_serve_registry_calls_in_flight":     {"gauge", "Calls to the registry (or layout) under way, bounded by --registry-concurrency."},
	"oprov_serve_registry_bytes_total":         {"counter", "Bytes of packages fetched from the registry into the cache."},
	"oprov_serve_connections_over_limit_total": {"counter", "Connections accepted past --max-connections, by outcome: reserve (served /healthz and /metrics only, briefly) or closed."},
	"process_cpu_seconds_total":                {"counter", "CPU time the process used, user and system, in seconds."},
	"process_resident_memory_bytes":            {"gauge", "Resident memory of the process, in bytes."},
	"process_resident_memory_peak_bytes":       {"gauge", "Peak resident memory of the process, in bytes."},
	"process_virtual_memory_bytes":             {"gauge", "Virtual memory of the process, in bytes."},
	"process_start_time_seconds":               {"gauge", "When the process started, in seconds since the Unix epoch."},
	"process_open_fds":                         {"gauge", "Open file descriptors of the process (connections and cache files among them)."},
	"process_max_fds":                          {"gauge", "The process's limit on open file descriptors."},
	"process_num_threads":                      {"gauge", "Operating-system threads of the process."},
	"go_goroutines":                            {"gauge", "Goroutines that currently exist."},
	"go_memstats_heap_inuse_bytes":             {"gauge", "Bytes of Go heap in spans in use."},
	"go_memstats_sys_bytes":                    {"gauge", "Bytes of memory obtained from the operating system by the Go runtime."},
	"go_memstats_alloc_bytes":                  {"gauge", "Bytes of allocated Go heap objects."},
	"go_memstats_alloc_bytes_total":            {"counter", "Bytes allocated on the Go heap since the start, freed or not."},
	"go_gc_cpu_seconds_total":                  {"counter", "CPU time spent in Go garbage collection, in seconds."},
}

// durationBuckets are the duration histogram's upper bounds, in seconds: from a cached
// index.json (milliseconds) to a cold archive over a slow link (a minute).
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// histograms is one histogram family with one label, with Prometheus' cumulative le buckets.
type histograms struct {
	name, label string
	bounds      []float64
	mu          sync.Mutex
	byValue     map[string]*histogram
}

type histogram struct {
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	count  atomic.Uint64
	mu     sync.Mutex
	sum    float64
}

func newHistograms(name, label string, bounds []float64) *histograms {
	return &histograms{name: name, label: label, bounds: bounds, byValue: map[string]*histogram{}}
}

func (h *histograms) observe(value string, v float64) {
	h.mu.Lock()
	x := h.byValue[value]
	if x == nil {
		x = &histogram{counts: make([]atomic.Uint64, len(h.bounds)+1)}
		h.byValue[value] = x
	}
	h.mu.Unlock()
	i := sort.SearchFloat64s(h.bounds, v) // the first bound >= v
	x.counts[i].Add(1)
	x.mu.Lock()
	x.sum += v
	x.mu.Unlock()
	x.count.Add(1)
}

func (h *histograms) empty() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byValue) == 0
}

func (h *histograms) write(w io.Writer) {
	h.mu.Lock()
	values := make([]string, 0, len(h.byValue))
	for v := range h.byValue {
		values = append(values, v)
	}
	h.mu.Unlock()
	sort.Strings(values)
	for _, v := range values {
		h.mu.Lock()
		x := h.byValue[v]
		h.mu.Unlock()
		lv := labelEscaper.Replace(v)
		var cum uint64
		for i := range x.counts {
			cum += x.counts[i].Load()
			le := "+Inf"
			if i < len(h.bounds) {
				le = strconv.FormatFloat(h.bounds[i], 'g', -1, 64)
			}
			fmt.Fprintf(w, "%s_bucket{%s=\"%s\",le=\"%s\"} %d\n", h.name, h.label, lv, le, cum)
		}
		x.mu.Lock()
		sum := x.sum
		x.mu.Unlock()
		// The count is the +Inf bucket's, so the two always agree within one scrape.
		fmt.Fprintf(w, "%s_sum{%s=\"%s\"} %s\n", h.name, h.label, lv, strconv.FormatFloat(sum, 'g', -1, 64))
		fmt.Fprintf(w, "%s_count{%s=\"%s\"} %d\n", h.name, h.label, lv, cum)
	}
}

// write writes the exposition: each listed family once, with its help and type, then its samples.
func (m *metrics) write(w io.Writer) {
	var raw bytes.Buffer
	m.set.WritePrometheus(&raw)
	vm.WriteProcessMetrics(&raw)
	vm.WriteFDMetrics(&raw)
	samples := map[string][]string{}
	sc := bufio.NewScanner(&raw)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name := l[:strings.IndexAny(l+" ", "{ ")]
		if _, ok := families[name]; ok {
			samples[name] = append(samples[name], l)
		}
	}
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	bw := bufio.NewWriter(w)
	for _, n := range names {
		f := families[n]
		if n == m.durations.name {
			if m.durations.empty() {
				continue
			}
			fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", n, f.help, n, f.typ)
			m.durations.write(bw)
			continue
		}
		if len(samples[n]) == 0 {
			continue
		}
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", n, f.help, n, f.typ)
		for _, l := range samples[n] {
			bw.WriteString(l)
			bw.WriteByte('\n')
		}
	}
	bw.Flush()
}
