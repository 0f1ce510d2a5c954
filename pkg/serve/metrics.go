package serve

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
)

// metrics are what /metrics exposes, on a set of the server's own (so two servers in one process,
// as in tests, do not collide), with the Go runtime's and the process's metrics. The library is
// github.com/VictoriaMetrics/metrics rather than Prometheus' client, whose dependencies' package
// initialisation cost every oprov command start-up time. Labelled series are made on first use,
// by their full name (see series).
type metrics struct {
	set              *vm.Set
	inFlight         *vm.Gauge
	archiveBytes     *vm.Counter
	registryInFlight *vm.Gauge
	registryBytes    *vm.Counter
	durations        *histograms
}

func newMetrics() *metrics {
	set := vm.NewSet()
	return &metrics{
		set:              set,
		inFlight:         set.NewGauge("oprov_serve_requests_in_flight", nil),
		archiveBytes:     set.NewCounter("oprov_serve_archive_bytes_total"),
		registryInFlight: set.NewGauge("oprov_serve_registry_calls_in_flight", nil),
		registryBytes:    set.NewCounter("oprov_serve_registry_bytes_total"),
		durations:        newHistograms("oprov_serve_request_duration_seconds", "route", durationBuckets),
	}
}

// request counts one answered request (oprov_serve_requests_total{route,code}) and its time
// (oprov_serve_request_duration_seconds{route}, a histogram with le buckets).
func (m *metrics) request(route string, code int, d time.Duration) {
	m.set.GetOrCreateCounter(series("oprov_serve_requests_total", "route", route, "code", strconv.Itoa(code))).Inc()
	m.durations.observe(route, d.Seconds())
}

// archiveCache counts an archive needed, by result: hit (in the cache) or miss (fetched).
func (m *metrics) archiveCache(result string) {
	m.set.GetOrCreateCounter(series("oprov_serve_archive_cache_total", "result", result)).Inc()
}

// refused counts a version or archive refused, by reason (policy, digest, registry, not_found).
func (m *metrics) refused(reason string) {
	m.set.GetOrCreateCounter(series("oprov_serve_refused_total", "reason", reason)).Inc()
}

// connectionsRefused counts a connection past MaxConnections, by what became of it: reserve
// (served /healthz and /metrics only, briefly) or closed.
func (m *metrics) connectionsRefused(how string) {
	m.set.GetOrCreateCounter(series("oprov_serve_connections_over_limit_total", "outcome", how)).Inc()
}

// labelEscaper escapes a label value as Prometheus' text format reads it.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// series names one series of a metric: name{label="value",...}, from label and value pairs.
func series(name string, labelValues ...string) string {
	var b strings.Builder
	b.WriteString(name)
	sep := byte('{')
	for i := 0; i+1 < len(labelValues); i += 2 {
		b.WriteByte(sep)
		sep = ','
		b.WriteString(labelValues[i])
		b.WriteString(`="`)
		labelEscaper.WriteString(&b, labelValues[i+1])
		b.WriteByte('"')
	}
	if sep == ',' {
		b.WriteByte('}')
	}
	return b.String()
}

func (m *metrics) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.write(w)
	})
}

// Plan and Advance make the metrics an oci.Progress for fetches from the registry.
func (m *metrics) Plan(int64)      {}
func (m *metrics) Advance(n int64) { m.registryBytes.AddInt64(n) }
