package k8s

import "time"

// The batch bound. A larger batch gives the optimiser more choice, and the
// stand-ins of a burst (projection.go) make batches large: what bounds a
// batch is what solving it costs, not how many claims it has. --max-batch
// (Options.MaxBatch, 0 by default: no bound) is a fixed bound for
// operators who want one. Beyond it, the bound is learnt from the solves:
// a solve that spends its whole budget (--timeout) and still leaves a gap
// above maxUsefulGap halves the next batches (never below
// minAdaptiveBatch); a solve proven within a quarter of its budget doubles
// the bound again, until it no longer binds.
const (
	minAdaptiveBatch = 64
	maxUsefulGap     = 0.05
)

// maxBatch is the bound of the next batch (0: none).
func (r *Reconciler) maxBatch() int {
	m := r.Opts.MaxBatch
	if r.batchLimit > 0 && (m == 0 || r.batchLimit < m) {
		m = r.batchLimit
	}
	return m
}

// adaptBatch learns the bound from a solve of n claims (stand-ins
// included) that took took, proven optimal or with the given gap.
func (r *Reconciler) adaptBatch(n int, optimal bool, gap float64, took time.Duration) {
	budget := r.Opts.Timeout
	if budget <= 0 {
		return
	}
	if r.Metrics != nil {
		defer func() { r.Metrics.BatchLimit.Set(float64(r.batchLimit)) }()
	}
	switch {
	case !optimal && gap > maxUsefulGap && took >= budget*9/10:
		r.batchLimit = max(n/2, minAdaptiveBatch)
	case r.batchLimit > 0 && optimal && took < budget/4:
		r.batchLimit *= 2
		if r.batchLimit > 2*n {
			r.batchLimit = 0 // the bound no longer binds
		}
	}
}
