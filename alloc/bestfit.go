package alloc

import (
	"context"
	"encoding/binary"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/model"
)

// bestFit places claims one by one in the given order, each at the
// placement that loses the least layout value at the relaxation's prices:
// the value a bin can still reach (bound.Value) before minus after. Cheap
// devices in bins that have nothing better to offer go first, so whole
// GPUs and the placements big claims need stay free.
//
// It gives up and returns nil when ctx ends or the deadline passes.
func bestFit(ctx context.Context, p *model.Problem, claims []*model.Claim, r *bound.Relaxation, price []float64, deadline time.Time) []*Assignment {
	s := model.NewState(p)
	// Bins of one type in the same state are worth the same: values are
	// memoised by type and used positions. The committed state's key of
	// each bin is kept until a placement touches the bin, so a candidate
	// placement only appends its own positions.
	memo := map[string]float64{}
	committed := make([]string, len(r.Bins))
	stateKey := func(b *bound.Bin) string {
		if committed[b.Index] == "" {
			key := binary.AppendUvarint(nil, uint64(b.Type))
			for i, d := range b.Devices {
				if s.Used(d) && !p.Devices[d].InUse {
					key = binary.AppendUvarint(key, uint64(i))
				}
			}
			committed[b.Index] = string(key)
		}
		return committed[b.Index]
	}
	value := func(key string, b *bound.Bin) float64 {
		if v, ok := memo[key]; ok {
			return v
		}
		v, _ := r.Value(b, s, price)
		memo[key] = v
		return v
	}
	// Nodes whose bins are in the same states offer the same placements:
	// only the first of them is looked at for each claim. Early on, when
	// most nodes are empty, this skips most of the work.
	nodeBins := map[int][]*bound.Bin{}
	for _, b := range r.Bins {
		if n := binNode(p, b); n >= 0 {
			nodeBins[n] = append(nodeBins[n], b)
		}
	}
	nodeKeys := map[int]string{}
	nodeKey := func(n int) string {
		if k, ok := nodeKeys[n]; ok {
			return k
		}
		keys := make([]string, 0, len(nodeBins[n]))
		for _, b := range nodeBins[n] {
			keys = append(keys, stateKey(b))
		}
		sort.Strings(keys)
		nodeKeys[n] = strings.Join(keys, "/")
		return nodeKeys[n]
	}
	var out []*Assignment
	var key []byte
	for i, c := range claims {
		if i%64 == 0 && (ctx.Err() != nil || time.Now().After(deadline)) {
			return nil
		}
		if c.Err != nil {
			continue
		}
		best, bestScore, bestRoom := (*Assignment)(nil), math.Inf(1), math.Inf(1)
		nodes := claimNodes(p, c)
		// Every node is looked at, each with a share of the search budget:
		// single-device claims are enumerated fully, large ones in part.
		perNode := max(bestFitMinBudget, bestFitBudget/len(nodes))
		looked := map[string]bool{}
		for _, n := range nodes {
			if _, ok := nodeBins[n]; ok {
				k := nodeKey(n)
				if looked[k] {
					continue
				}
				looked[k] = true
			}
			g := &placer{s: s, c: c, node: n, budget: perNode, inClaim: map[int]bool{}}
			g.each = func(picks []Pick) {
				// Loss over the bins the placement touches, each once. The
				// "before" value is the committed state's: the placer has
				// taken the picks, which "after" sees.
				score, room := 0.0, 0.0
				var seen []*bound.Bin
				for _, pk := range picks {
					b := r.BinOf(pk.Dev)
					if b == nil || containsBin(seen, b) {
						continue
					}
					seen = append(seen, b)
					before := stateKey(b)
					key = append(key[:0], before...)
					key = append(key, '+')
					for _, q := range picks {
						if r.BinOf(q.Dev) == b {
							key = binary.AppendUvarint(key, uint64(b.Position(q.Dev)))
						}
					}
					bv, ok := memo[before]
					if !ok {
						// First look at this bin state: value it without
						// the picks, then put them back.
						for _, q := range picks {
							if r.BinOf(q.Dev) == b {
								s.Release(q.Dev, exclusive(c, q))
							}
						}
						bv = value(before, b)
						for _, q := range picks {
							if r.BinOf(q.Dev) == b {
								s.Take(q.Dev, exclusive(c, q))
							}
						}
					}
					score += bv - value(string(key), b)
					room += bv
				}
				// Least value lost; among equals, the fullest bins (best fit).
				if score < bestScore-1e-6 || score < bestScore+1e-6 && room < bestRoom-1e-6 {
					bestScore, bestRoom = score, room
					best = &Assignment{Claim: c, Node: n, Picks: append([]Pick(nil), picks...)}
				}
			}
			g.request(0)
		}
		if best == nil {
			continue
		}
		best.take(s)
		for _, pk := range best.Picks {
			if b := r.BinOf(pk.Dev); b != nil {
				committed[b.Index] = ""
				delete(nodeKeys, binNode(p, b))
			}
		}
		out = append(out, best)
	}
	return out
}

// binNode is the one node all of b's devices are reachable from, or -1.
func binNode(p *model.Problem, b *bound.Bin) int {
	node := -1
	for _, d := range b.Devices {
		dev := p.Devices[d]
		if dev.All || len(dev.Reach) != 1 || node >= 0 && dev.Reach[0] != node {
			return -1
		}
		node = dev.Reach[0]
	}
	return node
}

// Search budgets of best-fit per claim, in placer steps.
const (
	bestFitBudget    = 20_000
	bestFitMinBudget = 300
)

// exclusive tells whether a pick occupies its device (admin access does
// not).
func exclusive(c *model.Claim, pk Pick) bool {
	return !c.Requests[pk.Req].Alternatives[pk.Alt].AdminAccess
}

func containsBin(bs []*bound.Bin, b *bound.Bin) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}
