package model

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"gopkg.in/inf.v0"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestWholeValuesScaleAsDecimals checks the int64 path of the counters'
// scaling against the exact decimal path it stands for: on random lists of
// quantities, whole and not, small and near the int64 limits, negative
// ones included, both give the same integers and unit, or the same error.
func TestWholeValuesScaleAsDecimals(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	whole := []string{"0", "1", "2", "7", "8", "40", "5Gi", "10Gi", "40Gi", "80Gi", "1k", "3M", "1Ti", "8E",
		fmt.Sprint(int64(math.MaxInt64)), fmt.Sprint(int64(math.MaxInt64 - 1)), fmt.Sprint(int64(math.MaxInt64 / 3)), "-1", "-5Gi"}
	other := []string{"500m", "1.5", "0.25Gi", "1n", "100E", "12345678901234567890", "1e-3"}
	pick := func() resource.Quantity {
		s := whole[rng.Intn(len(whole))]
		if rng.Intn(8) == 0 {
			s = other[rng.Intn(len(other))]
		}
		return resource.MustParse(s)
	}
	fast, total := 0, 0
	for i := 0; i < 20000; i++ {
		qs := make([]resource.Quantity, 1+rng.Intn(6))
		for j := range qs {
			qs[j] = pick()
		}
		uses := int64(1 + rng.Intn(3))
		if rng.Intn(50) == 0 {
			uses = math.MaxInt64 / 2
		}
		if _, ok := wholeValues(qs); ok {
			fast++
		}
		total++
		// Each path gets its own copies: the decimal one converts them.
		for _, exact := range []bool{false, true} {
			a, b := slices.Clone(qs), slices.Clone(qs)
			var got, want []int64
			var gotUnit, wantUnit string
			var gotErr, wantErr error
			if exact {
				got, gotUnit, gotErr = scaleExact(a)
				want, wantUnit, wantErr = scaleExactBig(b)
			} else {
				got, gotUnit, gotErr = scaleQuantities(a, uses)
				want, wantUnit, wantErr = scaleQuantitiesBig(b, uses)
			}
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !slices.Equal(got, want) || gotUnit != wantUnit {
				t.Fatalf("%v (uses %d, exact %t): got %v %q %v, decimal path %v %q %v", qs, uses, exact, got, gotUnit, gotErr, want, wantUnit, wantErr)
			}
		}
	}
	// The int64 path must be the one taken most of the time, or this
	// compares the decimal path with itself.
	if fast < total/3 {
		t.Fatalf("only %d of %d lists took the int64 path", fast, total)
	}
}

// TestScalePoolAmountsAreTheQuantities: on random pools, every counter's
// unit times a consumption's amount is the quantity the device consumes,
// whatever its notation, and unit times capacity is the counter's value
// (or, capped, uses times the sum of the consumptions).
func TestScalePoolAmountsAreTheQuantities(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	notations := []func(n int64) string{
		func(n int64) string { return fmt.Sprint(n) },
		func(n int64) string { return fmt.Sprintf("%dGi", n) },
		func(n int64) string { return fmt.Sprintf("%dm", n*250) },
		func(n int64) string { return fmt.Sprintf("%d.5", n) },
		func(n int64) string { return fmt.Sprintf("%dk", n) },
	}
	quantity := func() resource.Quantity {
		return resource.MustParse(notations[rng.Intn(len(notations))](1 + rng.Int63n(64)))
	}
	times := func(unit string, n int64) *inf.Dec {
		u := resource.MustParse(unit)
		return new(inf.Dec).Mul(u.AsDec(), inf.NewDec(n, 0))
	}
	for i := 0; i < 500; i++ {
		var sets []resourceapi.CounterSet
		for s := 0; s < 1+rng.Intn(3); s++ {
			cs := resourceapi.CounterSet{Name: fmt.Sprintf("set-%d", s), Counters: map[string]resourceapi.Counter{}}
			for c := 0; c < 1+rng.Intn(3); c++ {
				cs.Counters[fmt.Sprintf("c%d", c)] = resourceapi.Counter{Value: quantity()}
			}
			sets = append(sets, cs)
		}
		var devs []resourceapi.Device
		for d := 0; d < 1+rng.Intn(6); d++ {
			dev := resourceapi.Device{Name: fmt.Sprintf("dev-%d", d)}
			for _, cs := range sets {
				if rng.Intn(2) == 0 {
					continue
				}
				cc := resourceapi.DeviceCounterConsumption{CounterSet: cs.Name, Counters: map[string]resourceapi.Counter{}}
				for c := range cs.Counters {
					if rng.Intn(3) > 0 {
						cc.Counters[c] = resourceapi.Counter{Value: quantity()}
					}
				}
				dev.ConsumesCounters = append(dev.ConsumesCounters, cc)
			}
			devs = append(devs, dev)
		}
		slice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{SharedCounters: sets, Devices: devs}}
		uses := int64(1 + rng.Intn(2))
		ps := scalePool([]*resourceapi.ResourceSlice{slice}, uses)
		if ps.fitErr != nil {
			t.Fatalf("pool %d: %v", i, ps.fitErr)
		}
		// Sets by name, counters sorted, as scalePool orders them.
		sorted := slices.Clone(sets)
		slices.SortFunc(sorted, func(a, b resourceapi.CounterSet) int { return strings.Compare(a.Name, b.Name) })
		byName := map[string]int{}
		counterNames := make([][]string, len(sorted))
		sums := make([][]*inf.Dec, len(sorted))
		consumed := map[[2]int]bool{} // counters some device consumes
		for si, cs := range sorted {
			byName[cs.Name] = si
			for c := range cs.Counters {
				counterNames[si] = append(counterNames[si], c)
			}
			slices.Sort(counterNames[si])
			for range counterNames[si] {
				sums[si] = append(sums[si], new(inf.Dec))
			}
		}
		k := 0
		for _, dev := range devs {
			for _, cc := range dev.ConsumesCounters {
				si := byName[cc.CounterSet]
				for j, c := range counterNames[si] {
					want := inf.NewDec(0, 0)
					if v, ok := cc.Counters[c]; ok {
						want = v.Value.AsDec()
						consumed[[2]int{si, j}] = true
					}
					if got := times(ps.unit[si][j], ps.consumes[k][j]); got.Cmp(want) != 0 {
						t.Fatalf("pool %d, %s, counter %s, consumption %d: %d × %s = %s, want %s", i, cc.CounterSet, c, k, ps.consumes[k][j], ps.unit[si][j], got, want)
					}
					sums[si][j].Add(sums[si][j], want)
				}
				k++
			}
		}
		for si, cs := range sorted {
			for j, c := range counterNames[si] {
				v := cs.Counters[c].Value
				want := v.AsDec()
				// Capped only when something consumes it (a counter nothing
				// consumes never binds, and keeps its value).
				if capped := new(inf.Dec).Mul(sums[si][j], inf.NewDec(uses, 0)); consumed[[2]int{si, j}] && want.Cmp(capped) > 0 {
					want = capped
				}
				if got := times(ps.unit[si][j], ps.capacity[si][j]); got.Cmp(want) != 0 {
					t.Fatalf("pool %d, %s, counter %s: capacity %d × %s = %s, want %s", i, cs.Name, c, ps.capacity[si][j], ps.unit[si][j], got, want)
				}
			}
		}
	}
}
