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
	quant := map[[2]string][]resource.Quantity{}
	var keys [][2]string
	for _, s := range slices {
		for _, cs := range s.Spec.SharedCounters {
			for c, v := range cs.Counters {
				k := [2]string{cs.Name, c}
				quant[k] = append([]resource.Quantity{v.Value}, quant[k]...)
				keys = append(keys, k)
			}
		}
	}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			for _, cc := range d.ConsumesCounters {
				for c, v := range cc.Counters {
					k := [2]string{cc.CounterSet, c}
					if _, ok := quant[k]; ok {
						quant[k] = append(quant[k], v.Value)
					}
				}
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		if _, _, err := scaleQuantities(quant[k], uses); err != nil {
			return fmt.Errorf("counter set %s, counter %s: %w: drasat computes counters exactly in 64-bit integers and does not use this pool", k[0], k[1], err)
		}
	}
	return nil
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
