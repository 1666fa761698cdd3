package alloc

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// aggregateMinTime is the least time left for which the aggregated stage
// is worth starting: writing the model, CBC and the realisation.
const aggregateMinTime = 500 * time.Millisecond

// aggregateRealise solves the aggregated claim-pattern model per node
// (bound.WriteNodeAggregateLP) with CBC and realises its answer: every GPU
// keeps the devices of a layout holding its pattern, every admitted claim
// is held to its node, and the SAT model over just those claims and
// devices places them exactly. The patterns and nodes are the search the
// SAT model cannot do on large batches; what is left per node is small.
// A proven optimum of the aggregated model is also a bound (it is a
// relaxation). Skipped unless Options.UseCBC and cbc is on PATH, and when the relaxation could
// not enumerate layouts.
func aggregateRealise(ctx context.Context, cs *componentState, end time.Time) outcome {
	if !cs.opts.UseCBC || cs.rel == nil || !cs.short() || !cs.rel.Enumerated() || mip.CBCPath() == "" || time.Until(end) < aggregateMinTime {
		return skipped
	}
	// The stage takes at most ⅔ of the time left (enumerating the patterns
	// included): best-fit and the neighbourhood search follow when the
	// realisation fails, and on large batches they need the time.
	end = minTime(end, time.Now().Add(time.Until(end)*2/3))
	var buf bytes.Buffer
	if _, err := cs.rel.WriteNodeAggregateLPBy(&buf, end); err != nil {
		return outcome{}
	}
	dir, err := os.MkdirTemp("", "drasat-aggregate-")
	if err != nil {
		return outcome{}
	}
	defer os.RemoveAll(dir)
	lp := filepath.Join(dir, "aggregate.lp")
	if err := os.WriteFile(lp, buf.Bytes(), 0o600); err != nil {
		return outcome{}
	}
	// CBC gets most of the stage, the realisation (fast once nodes and
	// layouts are fixed) the rest.
	if time.Until(end) < aggregateMinTime/2 {
		return outcome{}
	}
	// CBC's limit is whole seconds: the context ends it at the stage's end
	// whatever it makes of the limit.
	cctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	sol, err := mip.SolveCBC(cctx, lp, time.Until(end)*4/5)
	if err != nil || sol.Objective < float64(cs.value)+1-1e-6 {
		return cboundOnly(cs, sol, err)
	}
	out := cboundOnly(cs, sol, nil)
	keep, err := cs.rel.RealiseLayouts(sol.Values, true)
	if err != nil {
		return out
	}
	nodes := cs.rel.NodesOf(sol.Values, cs.claims)
	orig := map[int]*model.Claim{}
	var held []*model.Claim
	for _, c := range cs.claims {
		n, ok := nodes[c.Index]
		if !ok || c.Err != nil {
			continue
		}
		cc := *c
		cc.FixedNode = n
		orig[c.Index] = c
		held = append(held, &cc)
	}
	m, err := encode.Encode(cs.p, held, encode.Options{Symmetry: true, DeviceSymmetry: true, Allowed: func(d int) bool { return keep[d] }})
	if err != nil {
		return out
	}
	// Ask for the aggregated optimum first (usually the realisation
	// reaches it at once), then for more than the incumbent, more and more.
	obj := objectiveSorter(m, cs.weight)
	s := solver.New(m.C, m.Clauses)
	var as []*Assignment
	val := cs.value
	for _, target := range []int64{int64(math.Floor(sol.Objective + 1e-6)), -1} {
		for {
			if target <= val {
				target = val + 1
			}
			if s.Solve(ctx, end, obj.Geq(int(target))) != solver.Sat {
				break
			}
			as = decode(cs.p, m, s)
			val = cs.valueOf(as)
			target = val + 1
		}
		if as != nil {
			break
		}
	}
	if as == nil {
		return out
	}
	for _, a := range as {
		a.Claim = orig[a.Claim.Index]
	}
	out.found, out.alloc = true, as
	return out
}

// cboundOnly is the bound a CBC run proves: the aggregated model's optimum,
// when CBC proved it.
func cboundOnly(cs *componentState, sol *mip.Solution, err error) outcome {
	if err != nil || sol == nil || sol.Status == "" || !isOptimal(sol.Status) || !plainDevices(cs) {
		return outcome{}
	}
	return outcome{bound: int64(math.Floor(sol.Objective + 1e-6)), hasBnd: true}
}

func isOptimal(status string) bool { return len(status) >= 7 && status[:7] == "Optimal" }

// plainDevices tells whether the component's claims ask only for
// exclusive devices by count: the aggregated model is a relaxation only
// then. Shared devices, allocationMode All and admin access are modelled
// loosely by the relaxation's items, which is sound for its Lagrangian
// bound but not for the integer optimum (seen on consumable-capacity
// instances), so their optimum is no bound.
func plainDevices(cs *componentState) bool {
	for _, c := range cs.claims {
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				if a.All || a.AdminAccess {
					return false
				}
				for _, d := range a.Candidates {
					if cs.p.Devices[d].MultiAlloc {
						return false
					}
				}
			}
		}
	}
	return true
}
