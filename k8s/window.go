package k8s

import (
	"context"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/hold"
)

// The adaptive batching window. A pass that sees only the claims of the
// last two seconds allocates first come, first served, and the optimiser
// has no choice. What gives it a choice is seeing the demand, and demand
// arrives with pods (and standalone claims), not with the claims the
// resourceclaim controller creates for pods already there: those are
// counted from their templates before they exist (projection.go). So after
// a change the controller
//
//   - acts at once when the last solve's plan still holds (no new demand,
//     nothing released, the inventory unchanged) and claims it planned for
//     have appeared: writing them needs no solve (plan.go);
//   - acts at once when the pending claims clearly all fit (fewer devices
//     asked for than free devices that consume no shared counters) and
//     every gated pod's claims exist or are projected;
//   - otherwise keeps collecting while new demand keeps arriving (a new
//     pod, a new claim; or a gated pod's claim that can be neither found
//     nor projected) or allocations keep being released, and acts once
//     neither happened for BatchWindow: a workload's pods are then decided
//     together, and so are the devices of pods leaving together (deleting
//     a job's pods releases their claims one after the other; solving
//     after each release fills the first devices freed with whatever
//     fits there, and a claim that needs several of them together loses;
//     docs/adapter.md, "Departures");
//   - never waits longer than MaxWindow after the first change, nor once
//     MaxBatch claims are pending, nor when the last pass left claims
//     out for the batch bound and those pending fill the next batch (on
//     a large cluster a stream outruns the passes, and what arrives
//     while the window waits would not be in the batch; held claims
//     alone do not count), nor longer than ReleaseWindow when
//     nothing but releases came since the window opened (pods that fit on
//     the devices freed are waiting meanwhile; releases after it are
//     solved for by the next pass).
//
// drasat_batch_window_seconds records the latency this added.

// windowState is what the window looks at, from one snapshot.
type windowState struct {
	keys    []string // demand keys of the claims and stand-ins a pass would solve (parked ones excluded)
	unknown int      // gated pods with a claim neither created nor projectable
	// backlog: the last pass left claims out for the batch bound, and the
	// claims pending (stand-ins and parked ones excluded) fill the next
	// batch.
	backlog bool
	fits    bool // the pending claims clearly all fit
	planned int  // claims the last solve's plan would write now
	// allocated: the UIDs of the claims allocated in the snapshot; one
	// gone since the last look is a release.
	allocated map[string]bool
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
	dem := projectDemandAt(s, r.Opts.Namespace, time.Now().Add(-r.Opts.StaleAfter))
	st.keys = demandKeys(dem, pending, dem.projected)
	bound := r.writeBatch()
	st.backlog = r.leftOut > 0 && bound > 0 && len(pending) >= bound
	st.allocated = map[string]bool{}
	for _, cl := range s.Claims {
		if cl.Status.Allocation != nil {
			st.allocated[string(cl.UID)] = true
		}
	}
	st.unknown = dem.unknown
	st.fits = clearlyFits(s, append(pending, dem.projected...))
	if r.plan != nil && r.fair != nil && r.plan.covers(st.keys, inventoryFingerprint(s), r.fair.epochOf(s)) {
		st.planned = r.plan.ready(st.keys)
	}
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
	counterFree := []string(nil)
	if s.derived != nil {
		counterFree = s.derived.counterFree
	} else {
		counterFree = counterFreeDevices(s)
	}
	free := 0
	for _, k := range counterFree {
		if !used[k] {
			free++
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
	lastArrival := start
	// sawRelease, sawDemand: what arrived since start (the change that
	// opened the window is in the first state already).
	sawRelease, sawDemand := false, false
	seen := map[string]bool{}
	for _, k := range st.keys {
		seen[k] = true
	}
	prev := st
	for {
		now := time.Now()
		demand, released := arrivedSince(prev, st, seen)
		prev = st
		if demand || released {
			lastArrival = now
		}
		sawRelease, sawDemand = sawRelease || released, sawDemand || demand
		if windowCloses(st, now.Sub(start), now.Sub(lastArrival), sawRelease && !sawDemand, r.Opts.window()) {
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

// window is o as the window applies it. With holding on, demand counts as
// arrived until none came for BatchWindow and the holder's least quiet
// time (hold.DefaultMinQuiet) both: a pass that came between the two
// would find a burst not yet over, hold most of it and spend the pass's
// budget on the holder's scenarios, and the pass after would admit it
// (seen on the load test's burst: the first pass held 178 of 300 claims
// for a quiet time 0.3 s away, and its scenarios took 7.4 s).
func (o Options) window() Options {
	if o.Hold > 0 {
		o.BatchWindow = max(o.BatchWindow, hold.DefaultMinQuiet)
	}
	return o
}

// arrivedSince reports whether, from prev to st, demand arrived (a key not
// in seen, which it adds, or a gated pod's claim neither found nor
// projected) and whether an allocation was released.
func arrivedSince(prev, st windowState, seen map[string]bool) (demand, released bool) {
	demand = st.unknown > 0
	for _, k := range st.keys {
		if !seen[k] {
			seen[k], demand = true, true
		}
	}
	for uid := range prev.allocated {
		if !st.allocated[uid] {
			released = true
			break
		}
	}
	return demand, released
}

// windowCloses is the window's rule (see above): open is the time since the
// first change, quiet the time since demand last arrived or an allocation
// was released; releasesOnly: releases came since the first change, and
// no demand.
func windowCloses(st windowState, open, quiet time.Duration, releasesOnly bool, o Options) bool {
	switch {
	case open >= o.MaxWindow:
		return true
	case releasesOnly && open >= o.ReleaseWindow:
		return true
	case o.MaxBatch > 0 && len(st.keys) >= o.MaxBatch:
		return true
	case st.backlog:
		return true
	case st.planned > 0:
		return true
	case st.unknown == 0 && st.fits:
		return true
	default:
		return quiet >= o.BatchWindow
	}
}
