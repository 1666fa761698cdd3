package model

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// CounterQuantitiesFit tells whether every counter of a pool's slices
// scales to exact int64 integers (scaleQuantities, uses as there), naming
// the first that does not.
func CounterQuantitiesFit(slices []*resourceapi.ResourceSlice, uses int64) error {
	return scalePool(slices, uses).fitErr
}

// scalePool scales a pool's counters to exact integers, once for the
// check and the build: each counter set's capacity and unit (sets by
// name, counters sorted) and every consumption's amounts in the order of
// the slices and their devices; or, in fitErr, the first counter (by set
// and name) that does not fit drasat's integers. A set defined twice
// keeps its last definition, and consumptions of sets or counters that
// do not exist are left out: such pools are invalid (poolInvalid) and
// only validation asks about them.
func scalePool(slices []*resourceapi.ResourceSlice, uses int64) *poolScale {
	ps := &poolScale{slices: slices, uses: uses}
	sets := map[string]*resourceapi.CounterSet{}
	var names []string
	for _, s := range slices {
		for i := range s.Spec.SharedCounters {
			cs := &s.Spec.SharedCounters[i]
			if _, dup := sets[cs.Name]; !dup {
				names = append(names, cs.Name)
			}
			sets[cs.Name] = cs
		}
	}
	sort.Strings(names)
	index := make(map[string]int, len(names))
	counters := make([][]string, len(names))
	// quant[set][counter]: the counter's value, then every consumption.
	quant := make([][][]resource.Quantity, len(names))
	for si, name := range names {
		index[name] = si
		cs := sets[name]
		for c := range cs.Counters {
			counters[si] = append(counters[si], c)
		}
		sort.Strings(counters[si])
		quant[si] = make([][]resource.Quantity, len(counters[si]))
		for j, c := range counters[si] {
			quant[si][j] = []resource.Quantity{cs.Counters[c].Value}
		}
	}
	// Where each consumption's quantities went: at[j] indexes quant[si][j]
	// (0: the device does not consume that counter).
	type place struct {
		si int
		at []int
	}
	var places []place
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			for _, cc := range d.ConsumesCounters {
				si, ok := index[cc.CounterSet]
				if !ok {
					continue
				}
				at := make([]int, len(counters[si]))
				for j, c := range counters[si] {
					if v, ok := cc.Counters[c]; ok {
						at[j] = len(quant[si][j])
						quant[si][j] = append(quant[si][j], v.Value)
					}
				}
				places = append(places, place{si, at})
			}
		}
	}
	ps.sets, ps.counters = names, counters
	units := make([][][]int64, len(names))
	for si, name := range names {
		units[si] = make([][]int64, len(counters[si]))
		capacity, unit := make([]int64, len(counters[si])), make([]string, len(counters[si]))
		for j, c := range counters[si] {
			u, un, err := scaleQuantities(quant[si][j], uses)
			if err != nil {
				ps.fitErr = fmt.Errorf("counter set %s, counter %s: %w: drasat computes counters exactly in 64-bit integers and does not use this pool", name, c, err)
				return ps
			}
			units[si][j], capacity[j], unit[j] = u, u[0], un
		}
		ps.capacity, ps.unit = append(ps.capacity, capacity), append(ps.unit, unit)
	}
	for _, pl := range places {
		amounts := make([]int64, len(pl.at))
		for j, at := range pl.at {
			if at > 0 {
				amounts[j] = units[pl.si][j][at]
			}
		}
		ps.consumes = append(ps.consumes, amounts)
	}
	return ps
}

// scaleQuantities turns quantities of one counter into exact integers in a
// common unit: the greatest common divisor of all of them. Floats never enter.
// qs[0] is the counter's value, the rest every device's consumption of it.
// A device's consumption counts at most uses times (its holder, and each
// claim taking it with admin access), so a value above uses times the sum
// of all consumptions can never bind: it is taken as that (exact, and it
// keeps huge capacities such as 10E usable). It returns the integers and
// the unit as a quantity string; an error when the result does not fit in
// int64 (the caller leaves the pool out).
func scaleQuantities(qs []resource.Quantity, uses int64) ([]int64, string, error) {
	if vs, ok := wholeValues(qs); ok {
		if capped, ok := capInts(vs, uses); ok {
			if out, unit, ok := scaleInts(capped); ok {
				return out, unit, nil
			}
		}
	}
	return scaleQuantitiesBig(qs, uses)
}

// scaleQuantitiesBig is scaleQuantities in exact decimal arithmetic, for
// any quantities.
func scaleQuantitiesBig(qs []resource.Quantity, uses int64) ([]int64, string, error) {
	if len(qs) > 1 {
		sum := resource.Quantity{}
		for _, q := range qs[1:] {
			sum.Add(q)
		}
		if uses > 1 {
			total := sum.AsDec()
			total.Mul(total, resource.NewQuantity(uses, resource.DecimalSI).AsDec())
			sum = *resource.NewDecimalQuantity(*total, resource.DecimalSI)
		}
		if qs[0].Cmp(sum) > 0 {
			qs = append([]resource.Quantity{sum}, qs[1:]...)
		}
	}
	return scaleExactBig(qs)
}

// scaleExact is scaleQuantities without the cap: for values that quantities
// may be drawn from more than once (a shared device's capacity, which
// every alternative may take a share of per request).
func scaleExact(qs []resource.Quantity) ([]int64, string, error) {
	if vs, ok := wholeValues(qs); ok {
		if out, unit, ok := scaleInts(vs); ok {
			return out, unit, nil
		}
	}
	return scaleExactBig(qs)
}

// wholeValues is every quantity as an int64 when each is a whole number
// held without a decimal (the common case: counts, bytes): the scaling is
// then integer arithmetic. It is the decimal path's answer, faster: that
// path spent half of a 1,000-node build's pools in math/big for values
// such as "1" and "40Gi".
func wholeValues(qs []resource.Quantity) ([]int64, bool) {
	vs := make([]int64, len(qs))
	for i := range qs {
		v, ok := qs[i].AsInt64()
		if !ok {
			return nil, false
		}
		vs[i] = v
	}
	return vs, true
}

// capInts is scaleQuantitiesBig's cap in int64: vs[0] is lowered to uses
// times the sum of the rest when it is above. False when the product
// overflows (the decimal path then decides).
func capInts(vs []int64, uses int64) ([]int64, bool) {
	if len(vs) < 2 {
		return vs, true
	}
	sum := int64(0)
	for _, v := range vs[1:] {
		if v > 0 && sum > math.MaxInt64-v || v < 0 && sum < math.MinInt64-v {
			return nil, false
		}
		sum += v
	}
	if uses > 1 {
		if sum != 0 && (sum > math.MaxInt64/uses || sum < math.MinInt64/uses) {
			return nil, false
		}
		sum *= uses
	}
	if vs[0] > sum {
		vs[0] = sum
	}
	return vs, true
}

// scaleInts is scaleExactBig on whole values: the common unit is their
// greatest common divisor. False where scaleExactBig fails (a negative
// value, a result above MaxCounterUnits): it then says why.
func scaleInts(vs []int64) ([]int64, string, bool) {
	if len(vs) == 0 {
		return nil, "1", true
	}
	g := int64(0)
	for _, v := range vs {
		if v < 0 {
			return nil, "", false
		}
		for b := v; b != 0; {
			g, b = b, g%b
		}
	}
	if g == 0 {
		g = 1
	}
	out := make([]int64, len(vs))
	for i, v := range vs {
		if out[i] = v / g; out[i] > MaxCounterUnits {
			return nil, "", false
		}
	}
	return out, strconv.FormatInt(g, 10), true
}

// scaleExactBig is scaleExact in exact decimal arithmetic, for any
// quantities.
func scaleExactBig(qs []resource.Quantity) ([]int64, string, error) {
	if len(qs) == 0 {
		return nil, "1", nil
	}
	decs := make([]*big.Int, len(qs))
	maxScale := int32(0)
	type dec struct {
		u *big.Int
		s int32
	}
	ds := make([]dec, len(qs))
	for i := range qs {
		d := qs[i].AsDec()
		ds[i] = dec{new(big.Int).Set(d.UnscaledBig()), int32(d.Scale())}
		maxScale = max(maxScale, ds[i].s)
	}
	// value = u * 10^-s; express all as integers times 10^-maxScale.
	for i, d := range ds {
		v := new(big.Int).Set(d.u)
		if shift := maxScale - d.s; shift > 0 {
			v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(shift)), nil))
		}
		decs[i] = v
	}
	g := new(big.Int)
	for _, v := range decs {
		if v.Sign() < 0 {
			return nil, "", fmt.Errorf("negative quantity")
		}
		g.GCD(nil, nil, g, v)
	}
	if g.Sign() == 0 {
		g.SetInt64(1)
	}
	out := make([]int64, len(decs))
	for i, v := range decs {
		q := new(big.Int).Quo(v, g)
		if q.Cmp(big.NewInt(MaxCounterUnits)) > 0 {
			return nil, "", fmt.Errorf("quantity %s too large relative to the others (more than %d of their common unit %s)", qs[i].String(), int64(MaxCounterUnits), unitString(g, maxScale))
		}
		out[i] = q.Int64()
	}
	return out, unitString(g, maxScale), nil
}

func unitString(g *big.Int, scale int32) string {
	if scale > 0 {
		return fmt.Sprintf("%se-%d", g.String(), scale)
	}
	return g.String()
}

// MaxCounterUnits bounds every scaled counter value and consumption, one
// below the int64 maximum, where sums saturate (SumUnits): a saturated sum
// exceeds every counter value, so "sum > value" compares exactly however
// many amounts are summed, and counter arithmetic never wraps around.
const MaxCounterUnits = math.MaxInt64 - 1

// SumUnits adds two amounts of a counter (each at most MaxCounterUnits or
// already saturated; a may be negative), saturating at math.MaxInt64.
func SumUnits(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// SubUnits takes amount a (0 to MaxCounterUnits) from a counter's free
// value, which may go negative (existing allocations may exceed the
// counter: nothing more fits) but saturates at -math.MaxInt64.
func SubUnits(free, a int64) int64 {
	if free < a-math.MaxInt64 {
		return -math.MaxInt64
	}
	return free - a
}
