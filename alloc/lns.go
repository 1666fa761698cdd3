package alloc

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// Neighbourhood search (large neighbourhood search, LNS) improves an
// allocation that falls short of the proven bound. One step frees the
// claims that sit entirely in a few bins (GPUs, TPU pools), and asks the
// SAT solver to repack those bins with them and with the claims not
// admitted so far, admitting more weight than was freed; everything else
// stays in place. The step's model is small (a few bins, the claims that
// can use them), so gini decides it in milliseconds, where the whole
// component's model would neither improve nor prove anything
// (docs/encoding.md, facts 1 and 6).
// Its step counts, neighbourhood sizes and step budget are Limits' LNS
// fields.

// neighbourhoodSearch improves best (claims admitted, of the component
// claims) towards the bound. It returns the best allocation found and the
// number of steps taken.
func neighbourhoodSearch(ctx context.Context, p *model.Problem, claims []*model.Claim, best []*Assignment, rel *bound.Relaxation,
	claimValue func(*model.Claim) int64, target int64, deadline time.Time, lim Limits) ([]*Assignment, int) {
	if len(rel.Bins) < 2 {
		return best, 0
	}
	value := func(as []*Assignment) (v int64) {
		for _, a := range as {
			v += claimValue(a.Claim)
		}
		return v
	}
	// Bins by node, so a neighbourhood can hold all the bins a node-wide
	// claim spans.
	byNode := map[int][]int{}
	for _, b := range rel.Bins {
		if n := binNode(p, b); n >= 0 {
			byNode[n] = append(byNode[n], b.Index)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(len(claims)), uint64(len(rel.Bins))))
	k := min(max(4, lim.LNSMinBins), lim.LNSMaxBins, len(rel.Bins))
	cur := best
	inB := make([]bool, len(p.Devices))
	picked := make([]bool, len(rel.Bins))
	state := model.NewState(p)
	for _, a := range cur {
		a.take(state)
	}
	steps, idle, stuck := 0, 0, 0
	for ; steps < lim.LNSSteps && idle < lim.LNSPatience && stuck < lim.LNSGiveUp && value(cur) < target; steps++ {
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
		// The neighbourhood: a random bin, the other bins of its node,
		// then random bins, k in all.
		var nb []int
		add := func(b int) {
			if !picked[b] && len(nb) < k {
				picked[b] = true
				nb = append(nb, b)
			}
		}
		// Every other neighbourhood starts at a bin with a free device: a
		// repacking that admits more often uses room left over somewhere.
		seed := rng.IntN(len(rel.Bins))
		if steps%2 == 0 {
			var slack []int
			for _, b := range rel.Bins {
				for _, d := range b.Devices {
					if state.Fits(d, true) {
						slack = append(slack, b.Index)
						break
					}
				}
			}
			if len(slack) > 0 {
				seed = slack[rng.IntN(len(slack))]
			}
		}
		add(seed)
		if n := binNode(p, rel.Bins[seed]); n >= 0 {
			same := byNode[n]
			for _, i := range rng.Perm(len(same)) {
				add(same[i])
			}
		}
		for len(nb) < k {
			add(rng.IntN(len(rel.Bins)))
		}
		for _, b := range nb {
			for _, d := range rel.Bins[b].Devices {
				inB[d] = true
			}
		}
		next, res, took := lnsStep(ctx, p, claims, cur, inB, claimValue, rng, deadline, lim)
		for _, b := range nb {
			picked[b] = false
			for _, d := range rel.Bins[b].Devices {
				inB[d] = false
			}
		}
		idle++
		if res == solver.Unknown && k == lim.LNSMinBins {
			stuck++
		} else {
			stuck = 0
		}
		switch {
		case res == solver.Sat && value(next) > value(cur) && len(podViolations(p, next)) == 0:
			for i := len(cur) - 1; i >= 0; i-- {
				cur[i].release(state)
			}
			cur, idle = next, 0
			for _, a := range cur {
				a.take(state)
			}
		case res == solver.Unknown:
			k = max(lim.LNSMinBins, k-1)
		case took < lim.LNSQuick:
			k = min(lim.LNSMaxBins, len(rel.Bins), k+1)
		}
	}
	return cur, steps
}

// lnsStep frees the claims of cur that lie entirely in the devices marked
// inB and repacks those devices with them and with the claims cur does not
// admit. It returns the new allocation when one with more weight exists.
func lnsStep(ctx context.Context, p *model.Problem, claims []*model.Claim, cur []*Assignment, inB []bool,
	claimValue func(*model.Claim) int64, rng *rand.Rand, deadline time.Time, lim Limits) ([]*Assignment, solver.Result, time.Duration) {
	start := time.Now()
	admitted := map[int]bool{}
	var keep, freed []*Assignment
	var fixed []encode.Fixed
	freedWeight := int64(0)
	for _, a := range cur {
		admitted[a.Claim.Index] = true
		inside, outside := 0, 0
		for _, pk := range a.Picks {
			if inB[pk.Dev] {
				inside++
			} else {
				outside++
			}
		}
		switch {
		case inside > 0 && outside == 0 && !hasAll(a.Claim):
			freed = append(freed, a)
			freedWeight += claimValue(a.Claim)
		case inside > 0:
			// Partly inside: it stays, and its devices inside count.
			f := encode.Fixed{}
			for _, pk := range a.Picks {
				if inB[pk.Dev] && exclusive(a.Claim, pk) {
					f.Devices = append(f.Devices, pk.Dev)
				}
			}
			fixed = append(fixed, f)
			keep = append(keep, a)
		default:
			keep = append(keep, a)
		}
		if f, ok := sharesWithCounters(p, a, inB); ok {
			fixed = append(fixed, f)
		}
	}
	var free []*model.Claim
	for _, a := range freed {
		free = append(free, a.Claim)
	}
	// Claims not admitted: all simple ones (a class shares one unit), but
	// non-simple ones are units of their own, and a few bins hold only a
	// few of them: a random sample of them, at most lim.LNSClassCap of a class.
	perClass := map[string]int{}
	var others []*model.Claim
	for _, c := range claims {
		if admitted[c.Index] || c.Err != nil || hasAll(c) || !mayUse(c, inB) {
			continue
		}
		if encode.IsSimple(c) {
			free = append(free, c)
			continue
		}
		others = append(others, c)
	}
	taken := 0
	for _, i := range rng.Perm(len(others)) {
		c := others[i]
		if k := c.ClassKey(); perClass[k] < lim.LNSClassCap && taken < lim.LNSOthers {
			perClass[k]++
			taken++
			free = append(free, c)
		}
	}
	if len(free) == 0 {
		return nil, solver.Unsat, time.Since(start)
	}
	sort.Slice(free, func(i, j int) bool { return free[i].Index < free[j].Index })
	m, err := encode.Encode(ctx, p, free, encode.Options{Symmetry: true, DeviceSymmetry: true, Fixed: fixed, Allowed: func(d int) bool { return inB[d] },
		PodsPlaced: podsPlaced(keep)})
	if err != nil {
		return nil, solver.Unknown, time.Since(start)
	}
	obj := objectiveSorter(m, claimValue)
	s := solver.New(m.C, m.Clauses)
	assume := append(m.Fixed, obj.Geq(int(freedWeight)+1))
	end := time.Now().Add(lim.LNSStepTime)
	if deadline.Before(end) {
		end = deadline
	}
	res := s.Solve(ctx, end, assume...)
	if res != solver.Sat {
		return nil, res, time.Since(start)
	}
	return append(keep, decode(p, m, s)...), res, time.Since(start)
}

// hasAll tells whether some alternative of c asks for all matching
// devices: those need every device of their node, not just a
// neighbourhood's, so such claims are left where they are.
func hasAll(c *model.Claim) bool {
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			if a.All {
				return true
			}
		}
	}
	return false
}

// mayUse tells whether every request of c has a candidate among the
// devices marked inB.
func mayUse(c *model.Claim, inB []bool) bool {
	return c.EveryRequest(func(a *model.Alternative) bool {
		return a.AdminAccess || slices.ContainsFunc(a.Candidates, func(d int) bool { return inB[d] })
	})
}

// sharesWithCounters holds in place the shares a kept claim has of shared
// devices that consume counters: shared devices are in no bin, yet their
// counters may be those of the neighbourhood's devices, which the model
// must see taken.
func sharesWithCounters(p *model.Problem, a *Assignment, inB []bool) (encode.Fixed, bool) {
	var f encode.Fixed
	for _, pk := range a.Picks {
		dev := p.Devices[pk.Dev]
		if !dev.MultiAlloc || inB[pk.Dev] || len(dev.Consumes) == 0 {
			continue
		}
		f.Devices = append(f.Devices, pk.Dev)
		f.Amounts = append(f.Amounts, a.Claim.Requests[pk.Req].Alternatives[pk.Alt].CapacityAmounts(pk.Dev))
	}
	return f, len(f.Devices) > 0
}
