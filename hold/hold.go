// Package hold decides which pending claims to admit now and which to hold
// back for demand that is forecast but not there yet: online stochastic
// optimisation with the consensus rule (Van Hentenryck and Bent, "Online
// Stochastic Combinatorial Optimization", 2006).
//
// A Holder learns, from the claims it is shown arriving, the distribution of
// claim shapes (specs) and the arrival rate. Before a batch is solved it
// samples a few scenarios of the claims to come within a horizon (a Poisson
// number of claims at the learnt rate, shapes drawn from the learnt mix),
// solves each scenario (the current claims plus the sampled ones) with the
// engine, and admits now, per shape, as many current claims as the
// scenarios agree on (the median over scenarios); the others are held,
// pending, for the next pass. A claim is never held longer than MaxHold
// after it was first seen, and nothing is held when no further demand is
// forecast (a claim alone on an idle cluster is admitted at once, as is
// every claim that fits together with the forecast demand), nor once
// demand has stopped: no arrival for longer than the longest gap seen
// between recent arrivals allows (QuietAt). Holding leaves devices idle,
// so a pass holds only while the expected gain pays for that
// (IdlePerClaim), at a stricter rate once arrivals pause
// (PauseIdlePerClaim).
//
// It works on model.Problem only (no cluster access), so a controller and
// an offline simulation use the same code.
package hold

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// Options steer a Holder. Zero fields take the defaults.
type Options struct {
	// Scenarios sampled per decision (default 5; odd numbers give a clean
	// median).
	Scenarios int
	// MaxHold bounds how long a claim may be held after it was first seen
	// (default 30s): past it, the claim is decided in every pass at its
	// own weight, competing with the claims still held (Decide).
	MaxHold time.Duration
	// Horizon is how far ahead the scenarios sample arrivals (default
	// MaxHold: a claim held now is decided again within it).
	Horizon time.Duration
	// Lookback is the period over which the arrival rate is measured
	// (default 60s): arrivals in the last Lookback, divided by the time
	// since the oldest of them, at least MinSpan and at most Lookback.
	Lookback time.Duration
	// MinSpan (default Lookback): below Lookback, a rate is measured
	// over the time arrivals have been seen, so that demand that started
	// recently is not underestimated (a burst is then overestimated:
	// holding until it decays).
	MinSpan time.Duration
	// Recheck bounds the time until held claims are decided again even
	// without new demand (default MaxHold/3).
	Recheck time.Duration
	// Timeout is the budget of all scenario solves together (default 5s).
	Timeout time.Duration
	// QuietFactor and MinQuiet tell when demand has stopped: when no claim
	// arrived for QuietFactor times the longest gap between the arrivals
	// within Lookback, and at least MinQuiet (defaults 1.5 and 3s). Then
	// nothing is forecast and every held claim is decided at once. A
	// burst's arrivals come close together, so the burst is over a few
	// seconds after its last claim; waves teach the gap between them, so
	// claims stay held across it; a steady stream's longest gap is a few
	// of its mean gaps. MinQuiet covers the API's creation timestamps,
	// which have a resolution of one second.
	QuietFactor float64
	MinQuiet    time.Duration
	// IdlePerClaim is what one more claim admitted is worth in idle
	// device time (default DefaultIdlePerClaim): a pass holds claims only
	// while the expected gain of holding (claims that would otherwise not
	// fit) times IdlePerClaim is at least the device-seconds the held
	// claims are expected to leave idle (Decision.Gain, Decision.Idle).
	// Negative: no such limit, the scenarios' consensus alone decides (as
	// before the rule; for comparisons).
	IdlePerClaim time.Duration
	// PauseAfter and PauseIdlePerClaim: once no claim arrived for
	// PauseAfter (default 10s), a hold must pay at PauseIdlePerClaim
	// (default DefaultPauseIdlePerClaim) when that is lower than
	// IdlePerClaim, and a pass that holds claims asks to run again at that
	// moment. While claims keep arriving the expected idle time is spent
	// waiting for claims that are coming; in a pause it is spent on a
	// forecast the pause may already contradict (the end of the last of
	// several waves looks like the gap between two), with fitting pods
	// gated and devices idle. Not used when IdlePerClaim is negative.
	PauseAfter        time.Duration
	PauseIdlePerClaim time.Duration
	// Objective and Policy of the scenario solves (alloc.Options).
	Objective, Policy string
	// Seed of the scenario sampler (the same seed and inputs give the same
	// decisions).
	Seed uint64
}

func (o *Options) defaults() {
	if o.Scenarios <= 0 {
		o.Scenarios = 5
	}
	if o.MaxHold <= 0 {
		o.MaxHold = 30 * time.Second
	}
	if o.Horizon <= 0 {
		o.Horizon = o.MaxHold
	}
	if o.Lookback <= 0 {
		o.Lookback = 60 * time.Second
	}
	if o.MinSpan <= 0 || o.MinSpan > o.Lookback {
		o.MinSpan = o.Lookback
	}
	if o.Recheck <= 0 {
		o.Recheck = max(o.MaxHold/3, time.Second)
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.QuietFactor <= 0 {
		o.QuietFactor = 1.5
	}
	if o.MinQuiet <= 0 {
		o.MinQuiet = DefaultMinQuiet
	}
	if o.IdlePerClaim == 0 {
		o.IdlePerClaim = DefaultIdlePerClaim
	}
	if o.PauseAfter <= 0 {
		o.PauseAfter = 10 * time.Second
	}
	if o.PauseIdlePerClaim <= 0 {
		o.PauseIdlePerClaim = DefaultPauseIdlePerClaim
	}
}

// DefaultMinQuiet is Options.MinQuiet's default.
const DefaultMinQuiet = 3 * time.Second

// DefaultIdlePerClaim is Options.IdlePerClaim's default: chosen in the
// arrival simulation (sim_test.go) on the 1,000-claim stream, the smallest
// rate tried that no longer declines its holds with either sampler seed
// (the expected idle time grows with the square of the claims held, so
// larger clusters need a larger rate: at 90 s the 1,000-claim stream fell
// to 75 % of offline, at 300 s to 93 % with one seed), and checked on the
// patterns it was not chosen on (docs/adapter.md).
const DefaultIdlePerClaim = 600 * time.Second

// DefaultPauseIdlePerClaim is Options.PauseIdlePerClaim's default: the
// rate chosen at 300 claims on the burst, stream and waves, which declines
// the hold after the last wave (about 124 device-seconds per claim gained)
// and keeps those between waves (25 to 58).
const DefaultPauseIdlePerClaim = 90 * time.Second

// protoPrefix names the prototype claims a Holder adds to a batch; ':' is
// not allowed in object names, so no real claim has such a name.
const protoPrefix = "hold-forecast:"

// Holder learns the demand and decides what to hold. Not safe for
// concurrent use.
type Holder struct {
	opts     Options
	shapes   []*shape
	byKey    map[string]*shape
	arrivals []time.Time          // arrival times within Lookback, ascending
	since    map[string]time.Time // demand key -> first seen
	rng      *rand.Rand
}

// shape is one claim spec seen arriving.
type shape struct {
	key   string
	proto *resourceapi.ResourceClaim
	seen  int
}

// New returns a Holder with opts (defaults filled in).
func New(opts Options) *Holder {
	opts.defaults()
	return &Holder{opts: opts, byKey: map[string]*shape{}, since: map[string]time.Time{},
		rng: rand.New(rand.NewPCG(opts.Seed, 0x686f6c64))}
}

// Options returns the options in effect.
func (h *Holder) Options() Options { return h.opts }

// Observe records a pending claim that arrived at now. key identifies the demand across
// passes (a claim that appears for a stand-in keeps the stand-in's key); a
// key seen before is not a new arrival.
func (h *Holder) Observe(now time.Time, key string, c *resourceapi.ResourceClaim) {
	if _, ok := h.since[key]; ok {
		return
	}
	h.since[key] = now
	// Kept in time order: a caller may observe with the object's creation
	// time, which need not come in order.
	i, _ := slices.BinarySearchFunc(h.arrivals, now, func(a, b time.Time) int { return a.Compare(b) })
	h.arrivals = slices.Insert(h.arrivals, i, now)
	k := shapeKey(c)
	s := h.byKey[k]
	if s == nil {
		p := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s%d", protoPrefix, len(h.shapes)),
				Namespace: c.Namespace,
				UID:       types.UID(fmt.Sprintf("%s%d", protoPrefix, len(h.shapes))),
			},
			Spec: *c.Spec.DeepCopy(),
		}
		if w, ok := c.Annotations[model.WeightAnnotation]; ok {
			p.Annotations = map[string]string{model.WeightAnnotation: w}
		}
		s = &shape{key: k, proto: p}
		h.byKey[k] = s
		h.shapes = append(h.shapes, s)
	}
	s.seen++
}

// Forget drops the first-seen times of demand keys no longer pending (keep
// reports whether a key still is), so the Holder's memory follows the
// pending demand. The learnt shapes and rate stay.
func (h *Holder) Forget(keep func(key string) bool) {
	for k := range h.since {
		if !keep(k) {
			delete(h.since, k)
		}
	}
}

// Since is when the demand key was first observed (zero if never).
func (h *Holder) Since(key string) time.Time { return h.since[key] }

// Rate is the arrival rate (claims per second) measured at now.
func (h *Holder) Rate(now time.Time) float64 {
	cut := now.Add(-h.opts.Lookback)
	i := sort.Search(len(h.arrivals), func(i int) bool { return h.arrivals[i].After(cut) })
	h.arrivals = h.arrivals[i:]
	if len(h.arrivals) == 0 {
		return 0
	}
	span := min(max(now.Sub(h.arrivals[0]), h.opts.MinSpan), h.opts.Lookback)
	return float64(len(h.arrivals)) / span.Seconds()
}

// Expected is the number of claims forecast to arrive within the horizon:
// none once demand has stopped (QuietAt).
func (h *Holder) Expected(now time.Time) float64 {
	rate := h.Rate(now)
	if quiet, ok := h.QuietAt(now); !ok || !now.Before(quiet) {
		return 0
	}
	return rate * h.opts.Horizon.Seconds()
}

// QuietAt is when demand counts as stopped if nothing arrives before:
// QuietFactor times the longest gap between the arrivals within Lookback
// of now after the last of them, at least MinQuiet. False when nothing
// arrived within Lookback.
func (h *Holder) QuietAt(now time.Time) (time.Time, bool) {
	cut := now.Add(-h.opts.Lookback)
	i := sort.Search(len(h.arrivals), func(i int) bool { return h.arrivals[i].After(cut) })
	recent := h.arrivals[i:]
	if len(recent) == 0 {
		return time.Time{}, false
	}
	var longest time.Duration
	for j := 1; j < len(recent); j++ {
		longest = max(longest, recent[j].Sub(recent[j-1]))
	}
	wait := max(time.Duration(h.opts.QuietFactor*float64(longest)), h.opts.MinQuiet)
	return recent[len(recent)-1].Add(wait), true
}

// pauseAt is when arrivals count as paused (PauseAfter after the last
// arrival; zero when none was seen) and whether they are at now.
func (h *Holder) pauseAt(now time.Time) (time.Time, bool) {
	if len(h.arrivals) == 0 {
		return time.Time{}, false
	}
	at := h.arrivals[len(h.arrivals)-1].Add(h.opts.PauseAfter)
	return at, !now.Before(at)
}

// Prototypes are one claim per learnt shape, to be built into the batch's
// problem after the pending claims: Decide samples the forecast claims
// from them and removes them from the problem it returns.
func (h *Holder) Prototypes() []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, len(h.shapes))
	for i, s := range h.shapes {
		out[i] = s.proto
	}
	return out
}

// IsPrototype tells whether c is one of the Holder's prototype claims.
func IsPrototype(c *resourceapi.ResourceClaim) bool {
	return len(c.Name) > len(protoPrefix) && c.Name[:len(protoPrefix)] == protoPrefix
}

// Decision is what Decide chose.
type Decision struct {
	// Problem is the input problem without the prototypes: first the
	// claims admitted now, their weights raised above the sum of the
	// weights of all that follow (when any is held); then the claims
	// whose hold ended or was declined (Declined), at their own weight;
	// then the held claims. When holds were declined, every weight is
	// scaled alike and the claims admitted now only get enough more to win
	// ties. Solving it admits as many of
	// the first as fit and places them so as to leave room for the others;
	// the late claims are admitted where they beat the held ones; Drop then
	// removes the held claims from the result: they stay pending.
	Problem *model.Problem
	// Kept and Held are indexes into the input problem's claims; in
	// Problem, the kept claims come first (in this order: those admitted
	// now, then the late ones), then the held.
	Kept, Held []int
	// Expected claims forecast within the horizon, and the scenarios
	// solved (0: nothing was forecast, or nothing could be held).
	Expected  float64
	Scenarios int
	// Recheck is when the held claims should be decided again at the
	// latest (zero when none is held).
	Recheck time.Time
	// Gain is the expected gain of holding, in claims (their weights):
	// the mean over the scenarios of what the scenario admits (current and
	// sampled claims) less what it admits when every current claim comes
	// first, as without holding. Idle is the device-seconds the claims the
	// scenarios agree to hold are expected to leave idle: their devices
	// (HeldDevices) until the sampled claims that take their room have
	// arrived, half of (held + Gain) / rate, within the horizon. Claims are
	// held only when Gain × IdlePerClaim is at least Idle; otherwise
	// Declined counts the claims the scenarios would have held, and all
	// are admitted now.
	Gain, Idle float64
	Declined   int

	unplaceable map[int]bool // held claims Drop found to fit nowhere
}

// Decide chooses, among p's pending claims, those to admit now. keys gives
// each claim of p its demand key (prototypes: ignored); every key must have
// been observed. Claims fixed to a node, claims that failed to build and
// claims held MaxHold already are never held.
func (h *Holder) Decide(ctx context.Context, p *model.Problem, keys []string, now time.Time) (*Decision, error) {
	if len(keys) != len(p.Claims) {
		return nil, fmt.Errorf("hold: %d keys for %d claims", len(keys), len(p.Claims))
	}
	var current, protos []*model.Claim
	protoOf := map[string]*model.Claim{} // shape key -> its prototype in p
	var candidates []int                 // current claims that may be held
	expired := map[int]bool{}            // held MaxHold already
	for _, c := range p.Claims {
		if IsPrototype(c.Obj) {
			protos = append(protos, c)
			protoOf[shapeKey(c.Obj)] = c
			continue
		}
		current = append(current, c)
		since, ok := h.since[keys[c.Index]]
		if !ok {
			since = now
		}
		switch {
		case c.FixedNode >= 0 || c.Err != nil:
		case now.Sub(since) < h.opts.MaxHold:
			candidates = append(candidates, c.Index)
		default:
			expired[c.Index] = true
		}
	}
	d := &Decision{Expected: h.Expected(now)}
	keepAll := func() *Decision {
		for _, c := range current {
			d.Kept = append(d.Kept, c.Index)
		}
		d.Problem = subProblem(p, current)
		return d
	}
	if len(candidates) == 0 || d.Expected < 1 || len(protos) == 0 {
		return keepAll(), nil
	}
	// Shapes to sample from, weighted by how often each was seen.
	var weights []float64
	var from []*model.Claim
	total := 0.0
	for _, s := range h.shapes {
		if pc := protoOf[s.key]; pc != nil && pc.Err == nil {
			from = append(from, pc)
			weights = append(weights, float64(s.seen))
			total += float64(s.seen)
		}
	}
	if len(from) == 0 {
		return keepAll(), nil
	}
	candShape := map[int]string{}
	byShape := map[string][]int{}
	for _, i := range candidates {
		k := shapeKey(p.Claims[i].Obj)
		candShape[i] = k
		byShape[k] = append(byShape[k], i)
	}
	// agreed[shape] collects, per scenario, how many of that shape's
	// candidates the scenario admits.
	agreed := map[string][]int{}
	// Two solves per scenario: with and without holding.
	per := h.opts.Timeout / time.Duration(2*h.opts.Scenarios)
	gain := 0.0 // summed over the scenarios
	for s := 0; s < h.opts.Scenarios; s++ {
		if ctx.Err() != nil {
			break
		}
		n := poisson(h.rng, d.Expected)
		claims := slices.Clone(current)
		future := make([]string, 0, n) // shape of each future claim
		for range n {
			pc := from[pick(h.rng, weights, total)]
			claims = append(claims, pc)
			future = append(future, shapeKey(pc.Obj))
		}
		q := subProblem(p, claims)
		out, err := alloc.Run(ctx, q, alloc.Options{Objective: h.opts.Objective, Policy: h.opts.Policy, Timeout: per})
		if err != nil {
			return nil, fmt.Errorf("hold: scenario %d: %w", s, err)
		}
		d.Scenarios++
		admitted := map[string]int{}
		leftOut := false // the scenario admits fewer of a shape's candidates than there are
		for _, a := range out.Assignments {
			j := a.Claim.Index
			if j < len(current) {
				if k, ok := candShape[current[j].Index]; ok {
					admitted[k]++
				}
			} else {
				admitted[future[j-len(current)]]++
			}
		}
		for k, idx := range byShape {
			agreed[k] = append(agreed[k], min(admitted[k], len(idx)))
			leftOut = leftOut || admitted[k] < len(idx)
		}
		if leftOut {
			g, err := h.holdingGain(ctx, q, len(current), claimWeight(out.Assignments), per)
			if err != nil {
				return nil, fmt.Errorf("hold: scenario %d without holding: %w", s, err)
			}
			gain += g
		}
	}
	if d.Scenarios == 0 {
		return keepAll(), nil
	}
	held := map[int]bool{}
	for k, idx := range byShape {
		counts := agreed[k]
		slices.Sort(counts)
		admit := counts[len(counts)/2] // the median: what most scenarios agree on
		// The longest-waiting claims of the shape first.
		slices.SortStableFunc(idx, func(a, b int) int {
			return h.since[keys[a]].Compare(h.since[keys[b]])
		})
		for _, i := range idx[admit:] {
			held[i] = true
		}
	}
	// Holding leaves the held claims' devices idle until the claims it
	// waits for come: hold only what the expected gain pays for. Declined
	// holds are decided now, as late ones.
	declined := map[int]bool{}
	if len(held) > 0 {
		d.Gain = gain / float64(d.Scenarios)
		devices := heldDevices(p, slices.Collect(maps.Keys(held)))
		wait := min((float64(len(held))+d.Gain)/h.Rate(now), h.opts.Horizon.Seconds())
		d.Idle = float64(devices) * wait / 2
		rate := h.opts.IdlePerClaim
		if _, paused := h.pauseAt(now); paused {
			rate = min(rate, h.opts.PauseIdlePerClaim)
		}
		if h.opts.IdlePerClaim > 0 && d.Gain*rate.Seconds() < d.Idle {
			d.Declined = len(held)
			declined, held = held, declined
		}
	}
	// Claims held MaxHold already (late) are decided now, but not before
	// the held ones: they compete with them at their own weight, so that a
	// large claim whose hold ended does not take the room of several
	// smaller ones still held (they are what an offline solve would admit).
	// The claims whose hold was declined are decided now too, as without
	// holding (the most claims), the kept ones preferred among as many.
	var kept, late, rest []*model.Claim
	lowerWeight := int64(0) // of the held and late claims: one kept claim outweighs them all
	for _, c := range current {
		switch {
		case expired[c.Index] || declined[c.Index]:
			late = append(late, c)
			lowerWeight += c.Weight
		case held[c.Index]:
			d.Held = append(d.Held, c.Index)
			rest = append(rest, c)
			lowerWeight += c.Weight
			due := h.since[keys[c.Index]].Add(h.opts.MaxHold)
			if d.Recheck.IsZero() || due.Before(d.Recheck) {
				d.Recheck = due
			}
		default:
			d.Kept = append(d.Kept, c.Index)
			kept = append(kept, c)
		}
	}
	for _, c := range late {
		d.Kept = append(d.Kept, c.Index)
	}
	if len(d.Held) == 0 {
		d.Problem = subProblem(p, append(kept, late...))
		if len(declined) > 0 {
			// As without holding, the most claims (weights); among as
			// many, the most of those the scenarios admit: each claim's
			// weight is scaled past what all kept claims add together.
			n := int64(len(kept))
			for i, c := range d.Problem.Claims {
				c.Weight *= n + 1
				if i < len(kept) {
					c.Weight++
				}
			}
		}
		return d, nil
	}
	if r := now.Add(h.opts.Recheck); r.Before(d.Recheck) {
		d.Recheck = r
	}
	// Decided again as soon as demand counts as stopped, if it does before,
	// and when arrivals pause (the hold must then pay at the pause's rate).
	if quiet, ok := h.QuietAt(now); ok && quiet.After(now) && quiet.Before(d.Recheck) {
		d.Recheck = quiet
	}
	if pause, paused := h.pauseAt(now); !paused && !pause.IsZero() && h.opts.IdlePerClaim > 0 &&
		h.opts.PauseIdlePerClaim < h.opts.IdlePerClaim && pause.Before(d.Recheck) {
		d.Recheck = pause
	}
	d.Problem = subProblem(p, append(append(kept, late...), rest...))
	// One kept claim outweighs all held ones and the late ones: the solve
	// admits the most kept claims first, and among those placements the
	// one leaving room for the most held and late claims (the placement
	// the held claims will need).
	for _, c := range d.Problem.Claims[:len(kept)] {
		c.Weight *= lowerWeight + 1
	}
	return d, nil
}

// HeldDevices is how many devices the held claims need at least: per
// request the fewest of its alternatives (all matching devices for
// allocationMode All). Holding leaves that much room free on purpose.
func (d *Decision) HeldDevices(p *model.Problem) int { return heldDevices(p, d.Held) }

func heldDevices(p *model.Problem, held []int) int {
	n := 0
	for _, i := range held {
		for _, r := range p.Claims[i].Requests {
			least := -1
			for _, a := range r.Alternatives {
				k := a.Count
				if a.All {
					k = len(a.AllMatch)
				}
				if least < 0 || k < least {
					least = k
				}
			}
			n += max(least, 0)
		}
	}
	return n
}

// IsHeld tells whether claim i of Decision.Problem is held.
func (d *Decision) IsHeld(i int) bool { return i >= len(d.Kept) && !d.unplaceable[i] }

// Drop removes the held claims from a solve of Decision.Problem: their
// assignments, rejections and unplaceable marks. They are neither
// admitted nor rejected now; the claims stay pending. A held claim that
// fits nowhere even alone is not held after all: it keeps its rejection
// (with its reason, so that it is reported unallocatable as any other),
// and IsHeld is false for it from then on.
func (d *Decision) Drop(out *alloc.Result) {
	if len(d.Held) == 0 {
		return
	}
	for _, i := range out.Unplaceable {
		if d.IsHeld(i) {
			if d.unplaceable == nil {
				d.unplaceable = map[int]bool{}
			}
			d.unplaceable[i] = true
		}
	}
	// A pod's claims are one decision: a held claim holds back the
	// other claims of its pods.
	heldGroups := map[*model.PodGroup]bool{}
	if d.Problem != nil {
		for i, c := range d.Problem.Claims {
			if d.IsHeld(i) && c.Group != nil {
				heldGroups[c.Group] = true
			}
		}
	}
	out.Assignments = slices.DeleteFunc(out.Assignments, func(a *alloc.Assignment) bool {
		return d.IsHeld(a.Claim.Index) || a.Claim.Group != nil && heldGroups[a.Claim.Group]
	})
	for i := range out.Rejected {
		if d.IsHeld(i) {
			delete(out.Rejected, i)
		}
	}
	out.Unplaceable = slices.DeleteFunc(out.Unplaceable, d.IsHeld)
	out.Stats.Admitted = len(out.Assignments)
}

// holdingGain is what holding gains in scenario q (its first current
// claims the pass's, the others sampled; best the weight the scenario's
// solve admitted): best less the weight admitted when every current claim
// outweighs all sampled ones, as when nothing is held. Never negative (a
// solve cut short by its budget may find less than the other).
func (h *Holder) holdingGain(ctx context.Context, q *model.Problem, current int, best int64, budget time.Duration) (float64, error) {
	g := subProblem(q, q.Claims)
	future := int64(0)
	for _, c := range g.Claims[current:] {
		future += c.Weight
	}
	for _, c := range g.Claims[:current] {
		c.Weight *= future + 1
	}
	out, err := alloc.Run(ctx, g, alloc.Options{Objective: h.opts.Objective, Policy: h.opts.Policy, Timeout: budget})
	if err != nil {
		return 0, err
	}
	without := int64(0)
	for _, a := range out.Assignments {
		without += q.Claims[a.Claim.Index].Weight
	}
	return float64(max(best-without, 0)), nil
}

// claimWeight is the weight of the claims admitted.
func claimWeight(as []*alloc.Assignment) int64 {
	w := int64(0)
	for _, a := range as {
		w += a.Claim.Weight
	}
	return w
}

// subProblem is p with only claims (in that order, re-indexed; the same
// claim may appear more than once, as the sampled future claims do). The
// devices, counters and nodes are shared: solving only reads them.
func subProblem(p *model.Problem, claims []*model.Claim) *model.Problem {
	q := *p
	q.Claims = make([]*model.Claim, len(claims))
	for i, c := range claims {
		cc := *c
		cc.Index = i
		cc.Requests = slices.Clone(c.Requests)
		cc.Constraints = slices.Clone(c.Constraints)
		if c.ExcludedNodes != nil {
			cc.ExcludedNodes = make(map[int]bool, len(c.ExcludedNodes))
			for n, v := range c.ExcludedNodes {
				cc.ExcludedNodes[n] = v
			}
		}
		if c.Obj != nil && IsPrototype(c.Obj) {
			cc.Key = fmt.Sprintf("%s#%d", c.Key, i)
			cc.Group = nil // a claim to come: no pod of the input uses it
		}
		q.Claims[i] = &cc
	}
	q.Regroup() // the pod groups by the new indices
	return &q
}

// shapeKey identifies a claim's demand: its spec and weight. Two claims of
// one shape can take each other's allocations.
func shapeKey(c *resourceapi.ResourceClaim) string {
	b, _ := json.Marshal(c.Spec)
	return c.Annotations[model.WeightAnnotation] + "\x00" + string(b)
}

// poisson samples a Poisson(lambda) count (normal approximation above 50).
func poisson(r *rand.Rand, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 50 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*r.NormFloat64())))
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// pick draws an index with probability weights[i]/total.
func pick(r *rand.Rand, weights []float64, total float64) int {
	x := r.Float64() * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}
