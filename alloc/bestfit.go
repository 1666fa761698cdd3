package alloc

import (
	"context"
	"encoding/binary"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
)

// bestFit places claims one by one in the given order, each at the
// placement that loses the least layout value at the relaxation's prices:
// the value a bin can still reach (bound.Value) before minus after. Cheap
// devices in bins that have nothing better to offer go first, so whole
// GPUs and the placements big claims need stay free.
//
// It gives up and returns nil when ctx ends or the deadline passes. The
// search per claim is bounded by lim.BestFitSteps and lim.BestFitMinSteps.
func bestFit(ctx context.Context, p *model.Problem, claims []*model.Claim, r *bound.Relaxation, price []float64, deadline time.Time, lim Limits) []*Assignment {
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
		v := r.ValueAt(b, s, price)
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
	// version[b] changes whenever a placement touches bin b: what was
	// worked out for the bin before is stale then.
	version := make([]int, len(r.Bins))
	commit := func(a *Assignment) {
		a.take(s)
		for _, pk := range a.Picks {
			if b := r.BinOf(pk.Dev); b != nil {
				committed[b.Index] = ""
				version[b.Index]++
				delete(nodeKeys, binNode(p, b))
			}
		}
	}
	simples := map[string]*simpleClass{}
	var out []*Assignment
	var key []byte
	for _, c := range claims {
		if ctx.Err() != nil || time.Now().After(deadline) { // every claim: one can take milliseconds on many nodes
			return nil
		}
		if c.Err != nil {
			continue
		}
		if sc := simple(p, r, c, simples); sc != nil {
			if d := sc.pick(s, version, func(b *bound.Bin, d int) (float64, float64) {
				before := stateKey(b)
				key = append(append(key[:0], before...), '+')
				key = binary.AppendUvarint(key, uint64(b.Position(d)))
				bv := value(before, b)
				s.Take(d, true)
				after := value(string(key), b)
				s.Release(d, true)
				return bv - after, bv
			}); d >= 0 {
				a := &Assignment{Claim: c, Node: deviceNode(p, d), Picks: []Pick{{0, 0, d}}}
				commit(a)
				out = append(out, a)
			}
			continue
		}
		best, bestScore, bestRoom := (*Assignment)(nil), math.Inf(1), math.Inf(1)
		nodes := claimNodes(p, c)
		// Every node is looked at, each with a share of the search budget:
		// single-device claims are enumerated fully, large ones in part.
		perNode := max(lim.BestFitMinSteps, lim.BestFitSteps/max(len(nodes), 1)) // no nodes: its pods' nodes are all excluded
		looked := map[string]bool{}
		for _, n := range nodes {
			if !s.PodAllows(c, n) {
				continue
			}
			if _, ok := nodeBins[n]; ok {
				k := nodeKey(n)
				if looked[k] {
					continue
				}
				looked[k] = true
			}
			g := newPlacer(s, c, n, perNode)
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
								ReleasePick(s, c, q)
							}
						}
						bv = value(before, b)
						for _, q := range picks {
							if r.BinOf(q.Dev) == b {
								TakePick(s, c, q)
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
		commit(best)
		out = append(out, best)
	}
	return out
}

// binNode is the one node all of b's devices are reachable from, or -1.
func binNode(p *model.Problem, b *bound.Bin) int { return p.CommonNode(b.Devices) }

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

// simpleClass is what best-fit keeps for claims that need one device of
// one alternative and nothing else (most claims): their placements are
// single devices, so the best device of each bin can be remembered until
// a placement touches the bin, instead of enumerating the whole cluster
// for every claim.
type simpleClass struct {
	bins  []*bound.Bin
	cands [][]int // per bin, the class's candidates in it, in candidate order
	cache []simpleBest
}

type simpleBest struct {
	version     int
	valid       bool
	dev         int
	score, room float64
}

// simple returns c's class when c is a simple claim, or nil.
func simple(p *model.Problem, r *bound.Relaxation, c *model.Claim, classes map[string]*simpleClass) *simpleClass {
	if !encode.IsSimple(c) {
		return nil
	}
	a := c.Requests[0].Alternatives[0]
	if sc, ok := classes[c.ClassKey()]; ok {
		return sc
	}
	sc := &simpleClass{}
	at := map[*bound.Bin]int{}
	for _, d := range a.Candidates {
		dev := p.Devices[d]
		b := r.BinOf(d)
		if b == nil || !dev.Reachable() {
			continue
		}
		i, ok := at[b]
		if !ok {
			i = len(sc.bins)
			at[b] = i
			sc.bins = append(sc.bins, b)
			sc.cands = append(sc.cands, nil)
		}
		sc.cands[i] = append(sc.cands[i], d)
	}
	sc.cache = make([]simpleBest, len(sc.bins))
	classes[c.ClassKey()] = sc
	return sc
}

// pick returns the device that loses the least layout value (fullest bin
// on ties), or -1 when none fits; loss scores one device.
func (sc *simpleClass) pick(s *model.State, version []int, loss func(b *bound.Bin, d int) (score, room float64)) int {
	best, bestScore, bestRoom := -1, math.Inf(1), math.Inf(1)
	for i, b := range sc.bins {
		e := &sc.cache[i]
		if !e.valid || e.version != version[b.Index] {
			*e = simpleBest{version: version[b.Index], valid: true, dev: -1, score: math.Inf(1), room: math.Inf(1)}
			for _, d := range sc.cands[i] {
				if !s.Fits(d, true) {
					continue
				}
				score, room := loss(b, d)
				if score < e.score-1e-6 || score < e.score+1e-6 && room < e.room-1e-6 {
					e.dev, e.score, e.room = d, score, room
				}
			}
		}
		if e.dev >= 0 && (e.score < bestScore-1e-6 || e.score < bestScore+1e-6 && e.room < bestRoom-1e-6) {
			best, bestScore, bestRoom = e.dev, e.score, e.room
		}
	}
	return best
}
