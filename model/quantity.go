package model

import (
	"fmt"
	"math/big"

	"k8s.io/apimachinery/pkg/api/resource"
)

// scaleQuantities turns quantities of one counter into exact integers in a
// common unit: the greatest common divisor of all of them. Floats never enter.
// It returns the integers and the unit as a quantity string.
func scaleQuantities(qs []resource.Quantity) ([]int64, string, error) {
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
	minScale := maxScale
	for _, d := range ds {
		minScale = min(minScale, d.s)
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
		if !q.IsInt64() {
			return nil, "", fmt.Errorf("quantity %s too large relative to the others", qs[i].String())
		}
		out[i] = q.Int64()
	}
	unit := g.String()
	if maxScale > 0 {
		unit = fmt.Sprintf("%se-%d", unit, maxScale)
	}
	_ = minScale
	return out, unit, nil
}
