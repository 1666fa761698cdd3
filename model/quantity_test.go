package model

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

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
