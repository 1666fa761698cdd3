package k8s

import "github.com/prometheus/client_golang/prometheus"

// liveMetrics: what fairness, the batching window and the writer do.
type liveMetrics struct {
	ParkedClaims  prometheus.Gauge
	WindowSeconds prometheus.Histogram
	Writes        *prometheus.CounterVec
	// PassesToFirstTry: passes between the first that saw a claim pending
	// and the one that first solved it (0: the same pass).
	PassesToFirstTry prometheus.Histogram
	// ProjectedClaims: stand-ins in the last solve (projection.go);
	// PlannedClaims: claims written from a plan, without a solve (plan.go).
	ProjectedClaims prometheus.Gauge
	PlannedClaims   prometheus.Counter
	// BatchLimit: the batch bound learnt from the solver's cost and the
	// passes' time (batch.go).
	BatchLimit prometheus.Gauge
	// HeldClaims: claims and stand-ins the last solve held back for
	// forecast demand (holding.go).
	HeldClaims prometheus.Gauge
	// HeldDeviceSeconds: the devices held claims need, times how long they
	// were held (holding.go): capacity left free on purpose.
	HeldDeviceSeconds prometheus.Counter
	// HoldsDeclined: claims the scenarios would have held, admitted instead
	// because the expected gain did not pay for the idle devices.
	HoldsDeclined prometheus.Counter
	// PhaseSeconds: where a pass's time goes, by phase: solve (build,
	// hold, solve), recheck (each claim re-checked before its write),
	// write (the writes, with the gates removed as pods complete) and
	// ungate (waiting for the cache, then the remaining gates).
	PhaseSeconds *prometheus.HistogramVec
	// AllocationsUndone: allocations drasat wrote that another component
	// removed before any pod used them (podrules.go); it must stay 0.
	AllocationsUndone prometheus.Counter
	// PassSeconds: a whole pass, from the snapshot to the last gate.
	PassSeconds prometheus.Histogram
}

func (m *Metrics) registerLive(f func(prometheus.Collector)) {
	m.ParkedClaims = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_parked_claims",
		Help: "Pending claims not solved at the last pass: unplaceable even alone, and nothing relevant changed since."})
	m.WindowSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drasat_batch_window_seconds",
		Help: "Latency the batching window added: from the first change to the start of the pass.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)})
	m.Writes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drasat_api_writes_total",
		Help: "API writes drasat made, by kind (claim, claim-status, pod)."}, []string{"kind"})
	m.PassesToFirstTry = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drasat_passes_to_first_try",
		Help: "Passes between the first that saw a claim pending and the first that solved it (0: that same pass).", Buckets: []float64{0, 1, 2, 3, 5, 10}})
	m.ProjectedClaims = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_projected_claims",
		Help: "Stand-ins in the last solve: template claims of gated pods that the resourceclaim controller had not created yet."})
	m.PlannedClaims = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_planned_claims_total",
		Help: "Claims written with the allocation the last solve planned for their stand-in, without solving again."})
	m.BatchLimit = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_batch_limit",
		Help: "The batch bound learnt from the solver's cost and the passes' time (0: none); --max-batch applies on top."})
	m.HeldClaims = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drasat_held_claims",
		Help: "Claims and stand-ins the last solve held back for forecast demand (--hold; 0: none or off)."})
	m.HeldDeviceSeconds = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_held_device_seconds_total",
		Help: "Devices the held claims need (the fewest per request), times the seconds from the pass that held them to the next pass: capacity left free on purpose for forecast demand (--hold)."})
	m.AllocationsUndone = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_allocations_undone_total",
		Help: "Allocations drasat wrote that another component (the kube-scheduler) removed before any pod used them; should stay 0."})
	m.HoldsDeclined = prometheus.NewCounter(prometheus.CounterOpts{Name: "drasat_holds_declined_total",
		Help: "Claims the forecast's scenarios would have held, decided at once instead: the claims holding was expected to gain, times --hold-idle-per-claim, did not pay for the device-seconds they would have left idle."})
	m.PhaseSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "drasat_pass_phase_seconds",
		Help:    "Time a pass spent per phase: solve (build, hold, solve), recheck (claims re-checked before writing), write (allocations written, gates removed as pods complete), ungate (the cache caught up, remaining gates removed).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}, []string{"phase"})
	m.PassSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drasat_pass_seconds",
		Help:    "Time a whole pass took, from reading the caches to the last gate removed.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)})
	for _, c := range []prometheus.Collector{m.PassSeconds, apiRequests, m.ParkedClaims, m.WindowSeconds, m.Writes, m.PassesToFirstTry, m.ProjectedClaims, m.PlannedClaims, m.BatchLimit, m.HeldClaims, m.HeldDeviceSeconds, m.HoldsDeclined, m.PhaseSeconds, m.AllocationsUndone} {
		f(c)
	}
}
