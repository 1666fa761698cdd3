package alloc

import (
	"context"
	"slices"

	"github.com/drasat/drasat/model"
)

// Assignment is one claim's allocation: the node it is for (-1 when no node
// matters) and the devices per request.
type Assignment struct {
	Claim *model.Claim
	Node  int
	Picks []Pick
}

// Pick is one device serving alternative Alt of request Req.
type Pick struct{ Req, Alt, Dev int }

// take allocates a's devices in s.
func (a *Assignment) take(s *model.State) {
	for _, pk := range a.Picks {
		TakePick(s, a.Claim, pk)
	}
	s.PlacePod(a.Claim, a.Node)
}

// release undoes take.
func (a *Assignment) release(s *model.State) {
	for i := len(a.Picks) - 1; i >= 0; i-- {
		ReleasePick(s, a.Claim, a.Picks[i])
	}
	s.UnplacePod(a.Claim, a.Node)
}

// FitsPick, TakePick and ReleasePick go through the state with the pick's
// alternative, which says what it consumes of a shared device's capacity
// (and admin access, which holds no device); placers outside alloc (the
// frag baselines) use them too.
func FitsPick(s *model.State, c *model.Claim, pk Pick) bool {
	return s.FitsFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

func TakePick(s *model.State, c *model.Claim, pk Pick) {
	s.TakeFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

func ReleasePick(s *model.State, c *model.Claim, pk Pick) {
	s.ReleaseFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

// greedy places claims in the given order and returns what fits; it stops
// early when ctx ends. Devices are only taken during a pass, so a claim
// that did not fit on a node never fits there later, nor does an
// identical claim: each class of identical claims searches each node at
// most once in vain (failed searches are most of a pass's work).
// steps bounds each claim's search per node.
func greedy(ctx context.Context, p *model.Problem, claims []*model.Claim, steps int) []*Assignment {
	return fill(ctx, p, nil, claims, steps)
}

// fill is greedy on top of an allocation: the devices of as are taken
// first, then the claims not in as are placed in order; it returns as
// with the claims placed appended.
func fill(ctx context.Context, p *model.Problem, as []*Assignment, claims []*model.Claim, steps int) []*Assignment {
	s := model.NewState(p)
	in := map[int]bool{}
	for _, a := range as {
		a.take(s)
		in[a.Claim.Index] = true
	}
	out := slices.Clone(as)
	full := map[string]map[int]bool{} // class -> nodes where it did not fit
	for i, c := range claims {
		if i%64 == 0 && ctx.Err() != nil {
			break
		}
		if in[c.Index] {
			continue
		}
		k := c.ClassKey()
		if full[k] == nil {
			full[k] = map[int]bool{}
		}
		if a, ok, _ := search(s, c, full[k], steps); ok {
			out = append(out, a)
		}
	}
	return out
}

// claimSize estimates how much of the counters a claim takes at least, for
// smallest-first ordering: per request its cheapest alternative, as the sum
// of counter fractions of its smallest candidate device times the count.
func claimSize(p *model.Problem, c *model.Claim) float64 {
	total := 0.0
	for _, r := range c.Requests {
		best := -1.0
		for _, a := range r.Alternatives {
			per := -1.0
			for _, d := range a.Candidates {
				f := DeviceShare(p, a, d)
				if per < 0 || f < per {
					per = f
				}
			}
			n := float64(a.Count)
			if a.All {
				n = float64(len(a.AllMatch))
			}
			v := (per + 1e-3) * n
			if per >= 0 && (best < 0 || v < best) {
				best = v
			}
		}
		total += max(best, 0)
	}
	return total
}
