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

// maxBatch is the bound of the next batch, claims and stand-ins together
// (0: none): the least of --max-batch, the bound learnt from the solver's
// cost and the one learnt from the passes' time.
func (r *Reconciler) maxBatch() int {
	return leastBound(r.Opts.MaxBatch, r.learntLimit())
}

// writeBatch bounds the claims of the next batch, which the pass writes
// (0: none): maxBatch and writeLimit. Stand-ins are not written in the
// pass that solves them (their claims do not exist yet), so only
// maxBatch bounds them: a burst is solved whole, its stand-ins included
// (with the write bound on them too, the 1,000-pod burst of the load
// test saw 208 of its pods in its first pass and bound 472 of 602).
func (r *Reconciler) writeBatch() int {
	return leastBound(r.maxBatch(), r.writeLimit())
}

// writeRequestsPerClaim is what writing one allocation costs the client
// that KubeAPIQPS rates: the claim's two updates (finalizer and
// annotation, then status.allocation) and the pod's, which removes the
// gate (Events go through a client of their own).
const writeRequestsPerClaim = 3

// writeLimit bounds a batch's claims by those whose writes fit, at the
// client's rate, in what the last solve left of passTarget (half of it
// before any solve: 208 at the defaults, 12.5 s at 50 requests a
// second). The first large batch is known by nothing else: at 500 nodes a
// pass of 539 claims spent 37 s to its solve and then wrote at that rate
// past --stuck-after; at 1,000 nodes the first pass, 300 claims, solved
// for 11 s (its build without the memo) and wrote for 28 s. 0: no bound.
func (r *Reconciler) writeLimit() int {
	if r.Opts.KubeAPIQPS <= 0 || r.passTarget() <= 0 {
		return 0
	}
	solve := r.lastSolve
	if solve == 0 {
		solve = r.passTarget() / 2
	}
	left := r.passTarget() - solve
	return max(int(left.Seconds()*r.Opts.KubeAPIQPS/writeRequestsPerClaim), minAdaptiveBatch)
}

// learntLimit is the bound learnt from the solver's cost and the passes'
// time (0: none; drasat_batch_limit).
func (r *Reconciler) learntLimit() int { return leastBound(r.batchLimit, r.timeLimit) }

// leastBound is the lesser of two bounds, 0 meaning none.
func leastBound(a, b int) int {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// A pass must end well before --stuck-after (Options.StuckAfter), past
// which /healthz fails and a leader gives up its Lease: on a large cluster
// a batch of several hundred claims took longer than that (the build, the
// hold-back's scenarios, the look-ahead, then three API requests a claim
// at the client's rate), and neither the solver's budget nor the gap rule
// bounds that. So the bound is also learnt from the passes' time: a pass
// of n claims that took longer than passTarget bounds the next batches to
// n × passTarget / its time (never below minAdaptiveBatch); a pass within
// half of passTarget doubles the bound, until it no longer binds.

// passTarget is the time a pass should take at most: a third of
// StuckAfter (25 s at the defaults), so that a pass may take three times
// as long as the one it was sized by before the controller gives up.
func (r *Reconciler) passTarget() time.Duration { return r.Opts.StuckAfter / 3 }

// adaptBatchToTime learns the bound from a pass that solved n claims
// (stand-ins included) and took took, from its start to its last write.
func (r *Reconciler) adaptBatchToTime(n int, took time.Duration) {
	target := r.passTarget()
	if target <= 0 || n <= 0 {
		return
	}
	if r.Metrics != nil {
		defer func() { r.Metrics.BatchLimit.Set(float64(r.learntLimit())) }()
	}
	switch {
	case took > target:
		l := max(int(float64(n)*float64(target)/float64(took)), minAdaptiveBatch)
		if r.timeLimit == 0 || l < r.timeLimit {
			r.timeLimit = l
		}
	case r.timeLimit > 0 && took < target/2:
		r.timeLimit *= 2
		if r.timeLimit > 2*n {
			r.timeLimit = 0 // the bound no longer binds
		}
	}
}

// adaptBatch learns the bound from a solve of n claims (stand-ins
// included) that took took, proven optimal or with the given gap.
func (r *Reconciler) adaptBatch(n int, optimal bool, gap float64, took time.Duration) {
	budget := r.Opts.Timeout
	if budget <= 0 {
		return
	}
	if r.Metrics != nil {
		defer func() { r.Metrics.BatchLimit.Set(float64(r.learntLimit())) }()
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
