package k8s

import (
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
)

func TestWindowCloses(t *testing.T) {
	o := Options{BatchWindow: 2 * time.Second, MaxBatch: 10, LiveOptions: LiveOptions{MaxWindow: 8 * time.Second}}
	s := time.Second
	for _, tc := range []struct {
		name        string
		st          windowState
		open, quiet time.Duration
		want        bool
	}{
		{"everything fits: act at once", windowState{pending: 3, fits: true}, 0, 0, true},
		{"contended, claims still arriving: wait", windowState{pending: 3}, 3 * s, s, false},
		{"contended, arrivals stopped: act", windowState{pending: 3}, 3 * s, 2 * s, true},
		{"fits but a pod's claims are still being created: wait", windowState{pending: 3, incomplete: 1, fits: true}, s, 0, false},
		{"bounded by the max window", windowState{pending: 3, incomplete: 1}, 8 * s, 0, true},
		{"a full batch: act", windowState{pending: 10}, 0, 0, true},
	} {
		if got := windowCloses(tc.st, tc.open, tc.quiet, o); got != tc.want {
			t.Errorf("%s: closes = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestClearlyFits(t *testing.T) {
	held := claim("held", 1, nil)
	held.Status.Allocation = onN1()
	s := &Snapshot{Slices: []*resourceapi.ResourceSlice{slice("n1", 3)}, Claims: []*resourceapi.ResourceClaim{held}}
	if !clearlyFits(s, []*resourceapi.ResourceClaim{claim("a", 1, nil), claim("b", 1, nil)}) {
		t.Error("two devices asked, two free: should fit")
	}
	if clearlyFits(s, []*resourceapi.ResourceClaim{claim("a", 2, nil), claim("b", 1, nil)}) {
		t.Error("three devices asked, two free (one held): should be contended")
	}
	part := slice("n2", 4)
	for i := range part.Spec.Devices {
		part.Spec.Devices[i].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu"}}
	}
	if clearlyFits(&Snapshot{Slices: []*resourceapi.ResourceSlice{part}}, []*resourceapi.ResourceClaim{claim("a", 1, nil)}) {
		t.Error("partitions (shared counters) must count as contended")
	}
}
