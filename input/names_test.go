package input

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestQuantityKeyRepresentation: equal quantities held differently must not
// share a key (CEL's asApproximateFloat tells them apart).
func TestQuantityKeyRepresentation(t *testing.T) {
	a, b := resource.MustParse("0.3"), resource.MustParse("300m")
	if a.String() != b.String() || a.AsApproximateFloat64() == b.AsApproximateFloat64() {
		t.Fatalf("premise: %s %s %v %v", a.String(), b.String(), a.AsApproximateFloat64(), b.AsApproximateFloat64())
	}
	if QuantityKey(a) == QuantityKey(b) {
		t.Errorf("0.3 and 300m share key %s", QuantityKey(a))
	}
	small, nano := resource.MustParse("0.0000000000000000001"), resource.MustParse("1n")
	if QuantityKey(small) == QuantityKey(nano) {
		t.Errorf("Dec- and int64-backed 1n share key %s", QuantityKey(nano))
	}
	if c := resource.MustParse("1Gi"); QuantityKey(c) != QuantityKey(resource.MustParse("1Gi")) {
		t.Errorf("1Gi: keys differ")
	}
}
