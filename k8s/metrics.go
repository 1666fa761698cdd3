package k8s

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Metrics are the adapter's Prometheus metrics.
type Metrics struct {
	Registry *prometheus.Registry

	ClaimsAllocated   prometheus.Counter
	ClaimsFailed      prometheus.Counter
	WriteConflicts    prometheus.Counter
	DeferredClaims    prometheus.Counter
	CheckRejections   prometheus.Counter
	GatesRemoved      prometheus.Counter
	Passes            prometheus.Counter
	PassErrors        prometheus.Counter
	BatchSize         prometheus.Histogram
	SolveSeconds      prometheus.Histogram
	Optimal           prometheus.Gauge
	Gap               prometheus.Gauge
	PendingClaims     prometheus.Gauge
	Leader            prometheus.Gauge
	UnallocatedClaims prometheus.Gauge
	Skipped           *prometheus.CounterVec

	liveMetrics // fairness, batching window, writes (metrics_live.go)
}

// NewMetrics registers the adapter's metrics (and the Go and process
// collectors) in a new registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	m := &Metrics{Registry: r}
	m.ClaimsAllocated = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_claims_allocated_total", Help: "Claims whose allocation drasat wrote."})
	m.ClaimsFailed = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_claims_unallocatable_total", Help: "Claims found unallocatable in a solve (counted once per new reason)."})
	m.DeferredClaims = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_deferred_claims_total", Help: "Claims a pass solved but left to the next pass, which takes them first: the pass reached its target (a third of --stuck-after)."})
	m.WriteConflicts = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_write_conflicts_total", Help: "Writes refused because the object changed since it was read; the claims are re-solved."})
	m.CheckRejections = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_check_rejections_total", Help: "Allocations not written (or withdrawn before ungating) because the re-check against the latest cache failed."})
	m.GatesRemoved = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_gates_removed_total", Help: "Pods whose drasat.dev/allocate scheduling gate drasat removed."})
	m.Passes = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_passes_total", Help: "Reconcile passes run."})
	m.PassErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_pass_errors_total", Help: "Reconcile passes that ended with an error."})
	m.BatchSize = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drasat_batch_size", Help: "Pending claims solved together.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	m.SolveSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drasat_solve_seconds", Help: "Time to build and solve one batch.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})
	m.Optimal = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_last_solve_optimal", Help: "1 when the last batch's allocation was proven optimal."})
	m.Gap = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_last_solve_gap", Help: "Relative gap between the last batch's objective and its proven bound."})
	m.PendingClaims = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_pending_claims", Help: "Pending claims drasat is responsible for, at the last pass."})
	m.UnallocatedClaims = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_unallocatable_claims", Help: "Claims left unallocated by the last pass."})
	m.Leader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_leader", Help: "1 while this replica holds the leader lease."})
	m.Skipped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drasat_skipped_objects_total", Help: "Objects left out of a pass because they are broken or their write was refused (kind: ResourceSlice, ResourceClaim, Pod); each also gets a Warning Event."}, []string{"kind"})
	for _, c := range []prometheus.Collector{m.Skipped, m.ClaimsAllocated, m.ClaimsFailed, m.WriteConflicts, m.DeferredClaims, m.CheckRejections, m.GatesRemoved,
		m.Passes, m.PassErrors, m.BatchSize, m.SolveSeconds, m.Optimal, m.Gap, m.PendingClaims, m.UnallocatedClaims, m.Leader,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	m.registerLive(f)
	return m
}

// Health tracks liveness and readiness for /healthz and /readyz.
type Health struct {
	ready atomic.Bool
	// passStart is when the running pass started (unix nanoseconds; 0
	// between passes).
	passStart atomic.Int64
	// StuckAfter is how long a pass may run before /healthz fails (0: never).
	StuckAfter time.Duration
	now        func() time.Time // for tests
}

// PassStarted records that a pass began; PassEnded that it ended.
func (h *Health) PassStarted() { h.passStart.Store(h.clock().UnixNano()) }

// PassEnded records that the running pass ended.
func (h *Health) PassEnded() { h.passStart.Store(0) }

func (h *Health) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// Stuck reports how long the running pass has run, when that is more than
// StuckAfter: a selector that never ends or a write that hangs must not
// leave the controller silently stuck while it reports healthy.
func (h *Health) Stuck() (time.Duration, bool) {
	start := h.passStart.Load()
	if start == 0 || h.StuckAfter <= 0 {
		return 0, false
	}
	d := h.clock().Sub(time.Unix(0, start))
	return d, d > h.StuckAfter
}

// SetReady marks the adapter ready (informer caches synced).
func (h *Health) SetReady(v bool) { h.ready.Store(v) }

// Ready reports readiness.
func (h *Health) Ready() bool { return h.ready.Load() }

// Handler serves /metrics, /healthz and /readyz.
func (m *Metrics) Handler(h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if d, stuck := h.Stuck(); stuck {
			http.Error(w, fmt.Sprintf("pass running for %s, more than %s\n", d.Round(time.Second), h.StuckAfter), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.Ready() {
			http.Error(w, "informer caches not synced\n", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Serve listens on addr and serves the handler until ctx ends. It returns
// the bound address (useful with port 0) once listening.
func Serve(ctx context.Context, addr string, handler http.Handler, log *zap.Logger) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", zap.Error(err))
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}
