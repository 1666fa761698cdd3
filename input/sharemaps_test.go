package input_test

import (
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/tools/scalegen"
)

// ShareDeviceMaps gives generated objects the sharing Load gives files:
// fewer distinct capacity maps afterwards (a node's GPUs of one model
// publish the same ones), and every slice reads as before.
func TestShareDeviceMaps(t *testing.T) {
	objs := scalegen.Generate(scalegen.Config{Nodes: 2, GPUs: 2, Claims: 4, Seed: 1})
	var before []*resourceapi.ResourceSlice
	for _, s := range objs.Slices {
		before = append(before, s.DeepCopy())
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
	for i, s := range objs.Slices {
		if !reflect.DeepEqual(s.Spec, before[i].Spec) {
			t.Errorf("slice %s changed by sharing", s.Name)
		}
	}
}
