// Package metrics is the Prometheus side of `oecp serve`: one Metrics
// value implements the observer ports of the server (server.Observer),
// the engine (engine.Observer), the store (store.Observer) and the agent
// harness (harness.UsageObserver), and counts retention and the trace
// export, so that none of those packages imports Prometheus; Handler
// serves the registry on /metrics.
//
// No label carries a tenant, principal, run id or any other unbounded
// value: methods are the protocol's (or "other"), codes the protocol's
// closed set, workers the built-in and host-configured ones (or "native",
// "other"), outcomes a closed set. Series on the request path are
// resolved once, on first use, and then cost an atomic load and add.
package metrics

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// Namespace prefixes every metric name.
const Namespace = "oecp"

// methodSlots is the number of method label values: every served
// method, then "other".
var methodSlots = len(protocol.Registry) + 1

// methodName is the label value of a server method index.
func methodName(i int) string {
	if i < 0 || i >= len(protocol.Registry) {
		return "other"
	}
	return protocol.Registry[i].Name
}

func slot(i int) int {
	if i < 0 || i >= len(protocol.Registry) {
		return len(protocol.Registry)
	}
	return i
}

// Metrics holds every oecp metric in its own registry.
type Metrics struct {
	reg *prometheus.Registry

	connsOpen      *prometheus.GaugeVec
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	refused        *prometheus.CounterVec
	cancels        prometheus.Counter
	cancelsEffect  prometheus.Counter
	subsOpen       *prometheus.GaugeVec
	delivered      *prometheus.CounterVec
	slowConsumer   *prometheus.CounterVec
	runsActive     prometheus.Gauge
	runsFinished   *prometheus.CounterVec
	execActive     *prometheus.GaugeVec
	execSettled    *prometheus.CounterVec
	dispatchWait   prometheus.Histogram
	commitDuration prometheus.Histogram
	commitFailures prometheus.Counter
	takeovers      prometheus.Counter
	compacted      prometheus.Counter
	agents         agentMetrics

	// Request-path series, resolved on first use.
	reqCells  []cell[prometheus.Counter] // [method slot * len(server.Codes) + code]
	durCells  []cell[prometheus.Observer]
	refCells  [len(server.Refusals)]cell[prometheus.Counter]
	subCells  []cell[prometheus.Gauge]
	delCells  []cell[prometheus.Counter]
	slowCells []cell[prometheus.Counter]
}

// cell holds one resolved series.
type cell[T any] struct{ p atomic.Pointer[T] }

// get returns the cell's series, resolving it the first time (racing
// resolutions return the same series).
func (c *cell[T]) get(resolve func() T) T {
	if p := c.p.Load(); p != nil {
		return *p
	}
	v := resolve()
	c.p.Store(&v)
	return v
}

// New registers every metric, with the Go runtime and process collectors,
// in a new registry.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := factory{m.reg}
	m.connsOpen = f.gaugeVec("connections_open", "Connections being served, by binding.", "binding")
	m.requests = f.counterVec("requests_total", "Answered requests (subscriptions: their establishment), by method and result code.", "method", "code")
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "request_duration_seconds",
		Help: "Time from admission to answer of a request, by method.", Buckets: prometheus.ExponentialBuckets(50e-6, 4, 10)}, []string{"method"})
	m.reg.MustRegister(m.duration)
	m.refused = f.counterVec("requests_refused_total", "Requests refused at admission: busy (SERVER_BUSY, every slot taken), duplicate_id (DUPLICATE_REQUEST_ID), tenant_rate and tenant_subscriptions (SERVER_BUSY, a tenant quota).", "reason")
	m.cancels = f.counter("cancels_received_total", "$/cancelRequest notifications received.")
	m.cancelsEffect = f.counter("cancels_effective_total", "$/cancelRequest notifications that cancelled a request in flight.")
	m.subsOpen = f.gaugeVec("subscriptions_open", "Live subscriptions, by method.", "method")
	m.delivered = f.counterVec("events_delivered_total", "Subscription event notifications written, by method.", "method")
	m.slowConsumer = f.counterVec("slow_consumer_closes_total", "Subscriptions closed with SLOW_CONSUMER, by method.", "method")
	m.runsActive = f.gauge("runs_active", "Runs in phase running at the supervisor's last pass.")
	m.runsFinished = f.counterVec("runs_finished_total", "Runs the supervisor finished, by terminal status (succeeded, failed).", "outcome")
	m.execActive = f.gaugeVec("executions_active", "Worker executions running in this process, by worker.", "worker")
	m.execSettled = f.counterVec("executions_settled_total", "Worker executions ended, by worker and outcome (ok, an error code, or cancelled when voided or stopped).", "worker", "outcome")
	m.dispatchWait = f.histogram("dispatch_start_latency_seconds", "Time from recording a dispatch to its worker starting.", prometheus.ExponentialBuckets(100e-6, 4, 10))
	m.commitDuration = f.histogram("store_commit_duration_seconds", "Duration of store read-write transactions that wrote, begin to commit.", prometheus.ExponentialBuckets(50e-6, 4, 10))
	m.commitFailures = f.counter("store_commit_failures_total", "Store transactions the store failed to begin or commit.")
	m.takeovers = f.counter("lease_takeovers_total", "Run supervision leases taken over from another owner.")
	m.compacted = f.counter("retention_compacted_runs_total", "Finished runs whose history retention deleted.")
	m.agents = newAgentMetrics(f)
	registerTracing(m.reg)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.zeroes()
	m.reqCells = make([]cell[prometheus.Counter], methodSlots*len(server.Codes))
	m.durCells = make([]cell[prometheus.Observer], methodSlots)
	m.subCells = make([]cell[prometheus.Gauge], methodSlots)
	m.delCells = make([]cell[prometheus.Counter], methodSlots)
	m.slowCells = make([]cell[prometheus.Counter], methodSlots)
	return m
}

// zeroes creates the series of the fixed label values (bindings,
// refusal reasons, subscription methods), so that a scrape shows them
// at zero before anything happened.
func (m *Metrics) zeroes() {
	for _, b := range []string{"websocket", "ndjson"} {
		m.connsOpen.WithLabelValues(b)
	}
	for _, r := range server.Refusals {
		m.refused.WithLabelValues(r)
	}
	for _, mi := range protocol.Registry {
		if mi.Kind == protocol.Subscription {
			m.subsOpen.WithLabelValues(mi.Name)
			m.delivered.WithLabelValues(mi.Name)
			m.slowConsumer.WithLabelValues(mi.Name)
		}
	}
	m.runsFinished.WithLabelValues(string(reduce.TerminalSucceeded))
	m.runsFinished.WithLabelValues(string(reduce.TerminalFailed))
}

// Registry returns the registry (tests, extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

type factory struct{ reg *prometheus.Registry }

// register adds c to reg and returns it.
func register[T prometheus.Collector](reg *prometheus.Registry, c T) T {
	reg.MustRegister(c)
	return c
}

func opts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: Namespace, Name: name, Help: help}
}

func (f factory) counter(name, help string) prometheus.Counter {
	return register(f.reg, prometheus.NewCounter(prometheus.CounterOpts(opts(name, help))))
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(f.reg, prometheus.NewCounterVec(prometheus.CounterOpts(opts(name, help)), labels))
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	return register(f.reg, prometheus.NewGauge(prometheus.GaugeOpts(opts(name, help))))
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(f.reg, prometheus.NewGaugeVec(prometheus.GaugeOpts(opts(name, help)), labels))
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(f.reg, prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}))
}

// ---- server.Observer ----

// Open implements server.Observer.
func (m *Metrics) Open(c server.ConnInfo) server.ConnObserver {
	g := m.connsOpen.WithLabelValues(c.Binding)
	g.Inc()
	return &connMetrics{m: m, open: g}
}

type connMetrics struct {
	m    *Metrics
	open prometheus.Gauge
}

func (c *connMetrics) Request(r server.RequestInfo) {
	m, s := c.m, slot(r.Method)
	m.reqCells[s*len(server.Codes)+int(r.Code)].get(func() prometheus.Counter {
		return m.requests.WithLabelValues(methodName(r.Method), server.Codes[r.Code])
	}).Inc()
	if r.Duration > 0 {
		m.durCells[s].get(func() prometheus.Observer { return m.duration.WithLabelValues(methodName(r.Method)) }).
			Observe(r.Duration.Seconds())
	}
}

func (c *connMetrics) Refused(r server.Refusal) {
	m := c.m
	m.refCells[r].get(func() prometheus.Counter { return m.refused.WithLabelValues(server.Refusals[r]) }).Inc()
}

func (c *connMetrics) Cancel(effective bool) {
	c.m.cancels.Inc()
	if effective {
		c.m.cancelsEffect.Inc()
	}
}

func (c *connMetrics) subs(method int) prometheus.Gauge {
	m := c.m
	return m.subCells[slot(method)].get(func() prometheus.Gauge { return m.subsOpen.WithLabelValues(methodName(method)) })
}

func (c *connMetrics) Subscribed(method int)   { c.subs(method).Inc() }
func (c *connMetrics) Unsubscribed(method int) { c.subs(method).Dec() }

func (c *connMetrics) Delivered(method int) {
	m := c.m
	m.delCells[slot(method)].get(func() prometheus.Counter { return m.delivered.WithLabelValues(methodName(method)) }).Inc()
}

func (c *connMetrics) SlowConsumer(method int) {
	m := c.m
	m.slowCells[slot(method)].get(func() prometheus.Counter { return m.slowConsumer.WithLabelValues(methodName(method)) }).Inc()
}

func (c *connMetrics) Closed(server.ConnStats) { c.open.Dec() }

// ---- engine.Observer ----

// RunsActive implements engine.Observer.
func (m *Metrics) RunsActive(n int) { m.runsActive.Set(float64(n)) }

// RunFinished implements engine.Observer.
func (m *Metrics) RunFinished(status string) { m.runsFinished.WithLabelValues(status).Inc() }

// ExecutionStarted implements engine.Observer.
func (m *Metrics) ExecutionStarted(worker string, wait time.Duration) {
	m.execActive.WithLabelValues(worker).Inc()
	m.dispatchWait.Observe(wait.Seconds())
}

// ExecutionEnded implements engine.Observer.
func (m *Metrics) ExecutionEnded(worker, outcome string) {
	m.execActive.WithLabelValues(worker).Dec()
	m.execSettled.WithLabelValues(worker, outcome).Inc()
}

// ---- store.Observer ----

// Commit implements store.Observer.
func (m *Metrics) Commit(d time.Duration, failed bool) {
	if failed {
		m.commitFailures.Inc()
		return
	}
	m.commitDuration.Observe(d.Seconds())
}

// LeaseTakenOver implements store.Observer.
func (m *Metrics) LeaseTakenOver() { m.takeovers.Inc() }

// Compacted counts runs whose history retention deleted.
func (m *Metrics) Compacted(runs int) { m.compacted.Add(float64(runs)) }
