package bound

import (
	"context"
	"math"
	"time"
)

// Result of minimising the Lagrangian dual.
type Result struct {
	// Bound is a proven upper bound on the admitted weight; math.MaxInt64
	// (no bound) when no iteration ran before the deadline.
	Bound int64
	// Value is the smallest L(π) seen; Bound is its floor.
	Value float64
	// Price is the π of Value, one per device kind, then one per capacity
	// of a shared device.
	Price []float64
	// Iterations of the subgradient method.
	Iterations int
	// Snapshots are the best π each time the step was halved, latest
	// last: prices at several stages of convergence, for heuristics whose
	// quality does not simply grow with it.
	Snapshots [][]float64
}

// eval computes L(π) and a subgradient.
func (r *Relaxation) eval(price []float64) (float64, []float64) {
	g := make([]float64, r.Kinds+r.Dims)
	total := 0.0
	// Each shared device's capacity, normalised to 1 (what is left), at
	// its price: the dual term of "the shares fit".
	for i := r.Kinds; i < len(price); i++ {
		total += price[i]
		g[i] = 1
	}
	for _, k := range r.classes {
		var used []struct {
			kind int
			n    float64
		}
		c := k.cost(price, r.Kinds, func(kind int, n float64) {
			used = append(used, struct {
				kind int
				n    float64
			}{kind, n})
		})
		if math.IsInf(c, 1) || c >= k.weight {
			continue
		}
		total += float64(k.n) * (k.weight - c)
		for _, u := range used {
			g[u.kind] -= float64(k.n) * u.n
		}
	}
	for _, t := range r.types {
		if lay := r.layoutsOf(t); lay != nil {
			v, vec := lay.best(price)
			total += float64(t.m) * v
			for _, kc := range vec {
				g[kc.kind] += float64(t.m) * kc.n
			}
			continue
		}
		v, set := r.Value(t.rep, r.state, price)
		total += float64(t.m) * v
		for _, d := range set {
			g[r.kindOf[d]] += float64(t.m)
		}
	}
	return total, g
}

// Options steer Solve.
type Options struct {
	// Start is a π to start from (a previous Result's Price); nil starts
	// where serving a claim costs about its weight.
	Start []float64
	// Patience is how many iterations without a better bound halve the
	// step; more is slower and tighter. 0 means 15.
	Patience int
}

// Solve minimises L(π) by subgradient descent with Polyak steps towards
// lower (the best admitted weight known), until the bound meets lower, the
// steps vanish, or the deadline passes.
func (r *Relaxation) Solve(ctx context.Context, lower int64, deadline time.Time, opts Options) Result {
	res := Result{Value: math.Inf(1)}
	if r.Kinds+r.Dims == 0 {
		// Nothing to price: L is the weight of the claims that need no
		// bin (admin access, shares that consume no capacity).
		v, _ := r.eval(nil)
		res.Value, res.Bound = v, int64(math.Floor(v+1e-6))
		return res
	}
	price := r.InitialPrice()
	if len(opts.Start) == len(price) {
		copy(price, opts.Start)
	}
	patience := opts.Patience
	if patience <= 0 {
		patience = 15
	}
	theta, stale := 1.0, 0
	for it := 0; it < 3000; it++ {
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		v, g := r.eval(price)
		res.Iterations++
		if v < res.Value-1e-9 {
			res.Value, res.Price, stale = v, append([]float64(nil), price...), 0
		} else if stale++; stale >= patience {
			theta, stale = theta/2, 0
			if n := len(res.Snapshots); n == 0 || !equalPrices(res.Snapshots[n-1], res.Price) {
				res.Snapshots = append(res.Snapshots, res.Price)
			}
		}
		if math.Floor(res.Value+1e-6) <= float64(lower) || theta < 1e-6 {
			break
		}
		norm := 0.0
		for _, x := range g {
			norm += x * x
		}
		if norm == 0 {
			break // L is flat here: this π is optimal
		}
		step := theta * math.Max(v-float64(lower), 0.5) / norm
		for i := range price {
			price[i] = math.Max(0, price[i]-step*g[i])
		}
	}
	res.Bound = math.MaxInt64
	if res.Iterations > 0 {
		res.Bound = int64(math.Floor(res.Value + 1e-6))
	}
	if n := len(res.Snapshots); res.Price != nil && (n == 0 || !equalPrices(res.Snapshots[n-1], res.Price)) {
		res.Snapshots = append(res.Snapshots, res.Price)
	}
	return res
}

func equalPrices(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// InitialPrice prices each kind so that serving a claim costs about its
// weight: the smallest weight per device of the claims that use the kind.
func (r *Relaxation) InitialPrice() []float64 {
	price := make([]float64, r.Kinds+r.Dims)
	for i := range price {
		price[i] = math.Inf(1)
	}
	for _, k := range r.classes {
		devices := 0.0
		for _, alts := range k.reqs {
			if len(alts) > 0 {
				devices += alts[0].cnt
			}
		}
		for _, alts := range k.reqs {
			for _, a := range alts {
				for _, kd := range a.kinds {
					price[kd] = math.Min(price[kd], k.weight/math.Max(devices, 1))
				}
				// A capacity: so that a share costs about the weight.
				for _, sh := range a.shares {
					for j, dim := range sh.dim {
						per := k.weight / math.Max(devices, 1) / (sh.frac[j] * float64(len(sh.dim)))
						price[r.Kinds+dim] = math.Min(price[r.Kinds+dim], per)
					}
				}
			}
		}
	}
	for i := range price {
		if math.IsInf(price[i], 1) {
			price[i] = 0
		}
	}
	return price
}
