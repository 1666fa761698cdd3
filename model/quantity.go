package model

import (
	"fmt"
	"math"
	"math/big"
	"sort"

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
	return scaleExact(qs)
}

// scaleExact is scaleQuantities without the cap: for values that quantities
// may be drawn from more than once (a shared device's capacity, which
// every alternative may take a share of per request).
func scaleExact(qs []resource.Quantity) ([]int64, string, error) {
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
