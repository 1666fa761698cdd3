package k8s

import (
	"context"
	"time"

	resourceapi "k8s.io/api/resource/v1"
)

// The adaptive batching window. A pass that sees only the claims of the
// last two seconds allocates first come, first served, and the optimiser
// has no choice. So after a change the controller keeps collecting while
// claims keep arriving and capacity is contended, and acts at once when
// nothing competes:
//
//   - act now when the pending claims clearly all fit (fewer devices asked
//     for than free devices that consume no shared counters) and no gated
//     pod is still waiting for its claims to be created;
//   - otherwise wait until no new claim arrived and no gated pod lacked a
//     claim for BatchWindow (the arrivals stopped: a workload's pods are
//     then decided together);
//   - never wait longer than MaxWindow after the first change, nor once
//     MaxBatch claims are pending.
//
// drasat_batch_window_seconds records the latency this added.

// windowState is what the window looks at, from one snapshot.
type windowState struct {
	pending    int  // claims a pass would solve (parked ones excluded)
	incomplete int  // gated pods some of whose claims do not exist yet
	fits       bool // the pending claims clearly all fit
}

func (c *Controller) windowState() windowState {
	r := c.Reconciler
	s, err := r.Cache.Snapshot()
	if err != nil {
		return windowState{}
	}
	var st windowState
	var pending []*resourceapi.ResourceClaim
	for _, cl := range ours(s, r.Opts.Namespace) {
		if r.fair == nil || !r.fair.isParked(cl) {
			pending = append(pending, cl)
		}
	}
	st.pending = len(pending)
	for _, p := range s.Pods {
		if !hasGate(p) || p.DeletionTimestamp != nil || (r.Opts.Namespace != "" && p.Namespace != r.Opts.Namespace) {
			continue
		}
		if _, complete := podClaimNames(p); !complete {
			st.incomplete++
		}
	}
	st.fits = clearlyFits(s, pending)
	return st
}

// clearlyFits is a cheap, conservative test that no pending claim competes
// with another: the devices they ask for number at most the free devices
// that consume no shared counters (selectors ignored, so it can say "fits"
// wrongly only when selectors split the devices; the solve is still exact,
// only the choice is smaller). Devices with shared counters (partitions)
// always count as contended.
func clearlyFits(s *Snapshot, pending []*resourceapi.ResourceClaim) bool {
	demand := 0
	for _, c := range pending {
		for _, rq := range c.Spec.Devices.Requests {
			switch {
			case rq.Exactly != nil && rq.Exactly.AllocationMode == resourceapi.DeviceAllocationModeAll:
				return false
			case rq.Exactly != nil:
				demand += int(max(rq.Exactly.Count, 1))
			case len(rq.FirstAvailable) > 0:
				demand += int(max(rq.FirstAvailable[0].Count, 1))
			}
		}
	}
	if demand == 0 {
		return true
	}
	used := map[string]bool{}
	for _, c := range s.Claims {
		if a := c.Status.Allocation; a != nil {
			for _, d := range a.Devices.Results {
				used[d.Driver+"/"+d.Pool+"/"+d.Device] = true
			}
		}
	}
	free := 0
	for _, sl := range s.Slices {
		for _, d := range sl.Spec.Devices {
			if len(d.ConsumesCounters) == 0 && !used[sl.Spec.Driver+"/"+sl.Spec.Pool.Name+"/"+d.Name] {
				free++
			}
		}
	}
	return demand <= free
}

// collect runs the window after a first change; false if ctx ended.
func (c *Controller) collect(ctx context.Context) bool {
	r := c.Reconciler
	start := time.Now()
	defer func() { r.Metrics.WindowSeconds.Observe(time.Since(start).Seconds()) }()
	tick := time.NewTicker(min(max(r.Opts.BatchWindow/4, time.Millisecond), 250*time.Millisecond))
	defer tick.Stop()
	st := c.windowState()
	lastArrival, seen := start, st.pending
	for {
		now := time.Now()
		if st.pending > seen || st.incomplete > 0 {
			lastArrival = now
		}
		seen = st.pending
		if windowCloses(st, now.Sub(start), now.Sub(lastArrival), r.Opts) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-r.Cache.Changed():
		case <-tick.C:
		}
		st = c.windowState()
	}
}

// windowCloses is the window's rule (see above): open is the time since the
// first change, quiet the time since the last arrival.
func windowCloses(st windowState, open, quiet time.Duration, o Options) bool {
	switch {
	case open >= o.MaxWindow:
		return true
	case o.MaxBatch > 0 && st.pending >= o.MaxBatch:
		return true
	case st.incomplete == 0 && st.fits:
		return true
	default:
		return quiet >= o.BatchWindow
	}
}
