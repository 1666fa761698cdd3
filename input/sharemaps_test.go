package input_test

import (
	"reflect"
	"testing"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/tools/scalegen"
)

// ShareDeviceMaps gives generated objects the sharing Load gives files:
// the same profile's MIG devices on two GPUs end up with one attribute
// map, and no map changes its contents.
func TestShareDeviceMaps(t *testing.T) {
	objs := scalegen.Generate(scalegen.Config{Nodes: 2, GPUs: 2, Claims: 4, Seed: 1})
	before := map[string]int{}
	for _, s := range objs.Slices {
		for _, d := range s.Spec.Devices {
			before[s.Spec.Pool.Name+"/"+d.Name] = len(d.Attributes)
		}
	}
	distinct := func() int {
		seen := map[uintptr]bool{}
		for _, s := range objs.Slices {
			for _, d := range s.Spec.Devices {
				seen[reflect.ValueOf(d.Capacity).Pointer()] = true
			}
		}
		return len(seen)
	}
	n := distinct()
	input.ShareDeviceMaps(objs)
	if m := distinct(); m >= n {
		t.Fatalf("%d distinct capacity maps after sharing, %d before", m, n)
	}
	for _, s := range objs.Slices {
		for _, d := range s.Spec.Devices {
			if got := len(d.Attributes); got != before[s.Spec.Pool.Name+"/"+d.Name] {
				t.Errorf("device %s: %d attributes after sharing", d.Name, got)
			}
		}
	}
}
