package k8s

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// onDevice is onN1's allocation on another of n1's GPUs.
func onDevice(dev string) *resourceapi.AllocationResult {
	a := onN1()
	a.Devices.Results[0].Device = dev
	return a
}

// A batch is re-checked at once; when that fails, claim by claim, so that
// only the claims that do not fit are held back: here c, solved onto the
// GPU a takes (as if another writer's allocation had moved a there).
func TestWriteAllRechecksTogetherThenOneByOne(t *testing.T) {
	for _, tc := range []struct {
		name      string
		devices   map[string]string
		written   []string
		rejection float64
	}{
		{"all fit", map[string]string{"a": "gpu-0", "b": "gpu-1", "c": "gpu-2"}, []string{"a", "b", "c"}, 0},
		{"one conflicts", map[string]string{"a": "gpu-0", "b": "gpu-1", "c": "gpu-0"}, []string{"a", "b"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{}, node("n1"), slice("n1", 3), class(), claim("a", 1, nil), claim("b", 1, nil), claim("c", 1, nil))
			snap, err := e.r.Cache.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var todo []*resourceapi.ResourceClaim
			for _, n := range []string{"a", "b", "c"} {
				c := e.claim(t, n).DeepCopy()
				c.Status.Allocation = onDevice(tc.devices[n])
				todo = append(todo, c)
			}
			written := map[string]*resourceapi.ResourceClaim{}
			var res PassResult
			if err := e.r.writeAll(context.Background(), snap, todo, written, &res); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"a", "b", "c"} {
				_, ok := written["default/"+n]
				want := contains(tc.written, n)
				if ok != want || (e.claim(t, n).Status.Allocation != nil) != want {
					t.Errorf("claim %s written %v, want %v", n, ok, want)
				}
			}
			if got := counterValue(t, e.r.Metrics.CheckRejections); got != tc.rejection {
				t.Errorf("check rejections %v, want %v", got, tc.rejection)
			}
			e.allFeasible(t)
		})
	}
}
