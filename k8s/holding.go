package k8s

import (
	"context"
	"time"

	"go.uber.org/zap"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/hold"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Holding capacity back for forecast demand (Options.Hold, package hold).
// A burst is decided whole by the stand-ins, but pods that do not exist
// yet (a stream, later waves) are unknown: a pass admits what it sees, the
// larger claims included, and they take the room of several later, smaller
// ones. With Hold set, a pass learns the claims' shapes and arrival rate,
// solves sampled scenarios of the claims to come within Hold, and admits
// now only what the scenarios agree on. A held claim stays pending (no
// Event, no annotation: it is not unallocatable), is decided again when
// new demand arrives or at the Decision's recheck time, and is never held
// longer than Hold after it was first seen.

// holdBack picks the claims of p to admit now. objs are the objects p was
// built from, prototypes included (added by holdObjects); it returns the
// problem to solve, the objects without the prototypes, and the decision
// (nil with holding off).
func (r *Reconciler) holdBack(ctx context.Context, p *model.Problem, objs *input.Objects, dem *demand, start time.Time) (*model.Problem, *input.Objects, *hold.Decision, error) {
	if r.holder == nil {
		return p, objs, nil, nil
	}
	keys := make([]string, len(p.Claims))
	for i, c := range p.Claims {
		if !hold.IsPrototype(c.Obj) {
			keys[i] = dem.key(c.Obj)
		}
	}
	d, err := r.holder.Decide(ctx, p, keys, start)
	if err != nil {
		return nil, nil, nil, err
	}
	// What the previous pass held stayed free until now.
	if !r.heldSince.IsZero() && start.After(r.heldSince) {
		r.Metrics.HeldDeviceSeconds.Add(float64(r.heldDevices) * start.Sub(r.heldSince).Seconds())
	}
	r.heldDevices, r.heldSince = d.HeldDevices(p), start
	clean := *objs
	clean.Claims = nil
	for _, c := range objs.Claims {
		if !hold.IsPrototype(c) {
			clean.Claims = append(clean.Claims, c)
		}
	}
	r.holdRecheck = d.Recheck
	r.Metrics.HeldClaims.Set(float64(len(d.Held)))
	if d.Declined > 0 {
		r.Metrics.HoldsDeclined.Add(float64(d.Declined))
	}
	if len(d.Held) > 0 || d.Scenarios > 0 {
		r.Log.Info("claims held for forecast demand", zap.Int("held", len(d.Held)), zap.Int("admittable", len(d.Kept)),
			zap.Float64("forecast", d.Expected), zap.Int("scenarios", d.Scenarios), zap.Time("recheck", d.Recheck),
			zap.Float64("gain", d.Gain), zap.Float64("idleDeviceSeconds", d.Idle), zap.Int("declined", d.Declined))
	}
	return d.Problem, &clean, d, nil
}

// holdObjects observes the batch's claims (arrival: their creation, or
// their pod's for a pod's claim, as a stand-in's) and adds the holder's
// prototypes to objs.
func (r *Reconciler) holdObjects(objs *input.Objects, solve []*resourceapi.ResourceClaim, dem *demand, now time.Time) {
	if r.Opts.Hold <= 0 {
		return
	}
	if r.holder == nil {
		// Half the pass's budget for the scenarios, the rest for the solve.
		r.holder = hold.New(hold.Options{MaxHold: r.Opts.Hold, IdlePerClaim: r.Opts.HoldIdle, Timeout: r.Opts.Timeout / 2,
			Objective: r.Opts.Objective, Policy: alloc.Binpack})
	}
	// A claim made from a pod's template arrived with its pod: the
	// resourceclaim controller creates a burst's claims over tens of
	// seconds (about 10 a second), and timed by them a burst that is over
	// looks like a stream still arriving (at 1,000 pods the first pass
	// forecast 3,333 more claims and spent 23 s on the scenarios).
	podCreated := make(map[types.UID]time.Time, len(objs.Pods))
	for _, p := range objs.Pods {
		podCreated[p.UID] = p.CreationTimestamp.Time
	}
	for _, c := range solve {
		at := c.CreationTimestamp.Time
		if o := metav1.GetControllerOf(c); o != nil && o.Kind == "Pod" {
			if t, ok := podCreated[o.UID]; ok && !t.IsZero() {
				at = t
			}
		}
		if at.IsZero() || at.After(now) {
			at = now
		}
		r.holder.Observe(at, dem.key(c), c)
	}
	objs.Claims = append(objs.Claims, r.holder.Prototypes()...)
}

// holdForget lets the holder forget demand no longer pending.
func (r *Reconciler) holdForget(dem *demand, pending []*resourceapi.ResourceClaim) {
	if r.holder == nil {
		return
	}
	keep := map[string]bool{}
	for _, k := range demandKeys(dem, pending, dem.projected) {
		keep[k] = true
	}
	r.holder.Forget(func(k string) bool { return keep[k] })
}
