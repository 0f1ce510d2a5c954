package serve

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are what /metrics exposes, on a registry of the server's own (so two servers in one
// process, as in tests, do not collide), with the Go runtime's and the process's collectors.
type metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	inFlight         prometheus.Gauge
	archiveBytes     prometheus.Counter
	archiveCache     *prometheus.CounterVec
	refused          *prometheus.CounterVec
	registryInFlight prometheus.Gauge
	registryBytes    prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oprov_serve_requests_total", Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "oprov_serve_request_duration_seconds", Help: "Time to answer a request, by route.",
			Buckets: []float64{.001, .005, .025, .1, .5, 1, 2.5, 10, 30, 120},
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oprov_serve_requests_in_flight", Help: "Requests being answered now (downloads included).",
		}),
		archiveBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oprov_serve_archive_bytes_total", Help: "Archive bytes sent to clients.",
		}),
		archiveCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oprov_serve_archive_cache_total", Help: "Archives needed, by whether the cache had them (hit) or they were fetched (miss).",
		}, []string{"result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oprov_serve_refused_total", Help: "Versions or archives refused, by reason (policy, digest, registry, not_found).",
		}, []string{"reason"}),
		registryInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oprov_serve_registry_calls_in_flight", Help: "Calls to the registry (or layout) under way; bounded by --registry-concurrency.",
		}),
		registryBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oprov_serve_registry_bytes_total", Help: "Archive bytes fetched from the registry (or layout) into the cache.",
		}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.inFlight, m.archiveBytes, m.archiveCache, m.refused,
		m.registryInFlight, m.registryBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Plan and Advance make the metrics an oci.Progress for fetches from the registry.
func (m *metrics) Plan(int64)      {}
func (m *metrics) Advance(n int64) { m.registryBytes.Add(float64(n)) }
