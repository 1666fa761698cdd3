package encode

import (
	"fmt"
	"strings"

	"github.com/drasat/drasat/model"
)

// maxLayouts bounds the enumeration of one counter set's layouts.
const maxLayouts = 200_000

// impliedCounters returns, per counter of set, whether it can never bind:
// every set of free devices that respects the set's "at most one" counters
// (any two consumers exceed the free amount, like MIG memory slices) stays
// within the counter's free amount. Real MIG layouts make the
// multiprocessor, engine and memory counters implied (docs/encoding.md, facts 5),
// which removes most weighted constraints. Identical GPUs share the answer.
func (m *Model) impliedCounters(set *model.CounterSet, devs []int) []bool {
	var key strings.Builder
	fmt.Fprint(&key, set.Free, "|")
	amounts := make([][]int64, len(devs))
	for i, d := range devs {
		for _, c := range m.P.Devices[d].Consumes {
			if c.Set == set.Index {
				amounts[i] = c.Amounts
			}
		}
		fmt.Fprint(&key, amounts[i], ";")
	}
	if r, ok := m.impliedCache[key.String()]; ok {
		return r
	}
	nc := len(set.Counters)
	amo := make([]bool, nc)
	out := make([]bool, nc)
	for j := 0; j < nc; j++ {
		var a, b int64 // two smallest positive amounts
		n := 0
		for i := range devs {
			w := amounts[i][j]
			if w <= 0 {
				continue
			}
			n++
			switch {
			case a == 0 || w < a:
				a, b = w, a
			case b == 0 || w < b:
				b = w
			}
		}
		amo[j] = n >= 2 && model.SumUnits(a, b) > set.Free[j]
		out[j] = true // refuted below
	}
	used := make([]int64, nc)
	best := make([]int64, nc)
	visited := 0
	var dfs func(i int) bool
	dfs = func(i int) bool {
		visited++
		if visited > maxLayouts {
			return false
		}
		for j := range best {
			best[j] = max(best[j], used[j])
		}
		for k := i; k < len(devs); k++ {
			ok := true
			for j := 0; j < nc; j++ {
				if amo[j] && model.SumUnits(used[j], amounts[k][j]) > set.Free[j] {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			saved := append([]int64(nil), used...)
			for j := 0; j < nc; j++ {
				// Saturating: a sum past every counter value stays past it.
				used[j] = model.SumUnits(used[j], amounts[k][j])
			}
			cont := dfs(k + 1)
			copy(used, saved)
			if !cont {
				return false
			}
		}
		return true
	}
	complete := dfs(0)
	for j := 0; j < nc; j++ {
		out[j] = !amo[j] && complete && best[j] <= set.Free[j]
	}
	m.impliedCache[key.String()] = out
	return out
}
