package k8s

import (
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/hold"
)

func keysN(n int) []string {
	var ks []string
	for i := range n {
		ks = append(ks, fmt.Sprintf("claim:%d", i))
	}
	return ks
}

func TestWindowCloses(t *testing.T) {
	o := Options{BatchWindow: 2 * time.Second, MaxBatch: 10, LiveOptions: LiveOptions{MaxWindow: 8 * time.Second, ReleaseWindow: 4 * time.Second}}
	s := time.Second
	for _, tc := range []struct {
		name         string
		st           windowState
		open, quiet  time.Duration
		releasesOnly bool
		want         bool
	}{
		{"everything fits: act at once", windowState{keys: keysN(3), fits: true}, 0, 0, false, true},
		{"contended, demand still arriving: wait", windowState{keys: keysN(3)}, 3 * s, s, false, false},
		{"contended, arrivals stopped: act", windowState{keys: keysN(3)}, 3 * s, 2 * s, false, true},
		{"fits but a pod's claim can be neither found nor projected: wait", windowState{keys: keysN(3), unknown: 1, fits: true}, s, 0, false, false},
		{"bounded by the max window", windowState{keys: keysN(3), unknown: 1}, 8 * s, 0, false, true},
		{"a full batch: act", windowState{keys: keysN(10)}, 0, 0, false, true},
		{"a backlog fills the next batch, demand still arriving: act", windowState{keys: keysN(8), backlog: true}, s, 0, false, true},
		{"the plan holds and claims it decided appeared: act", windowState{keys: keysN(3), planned: 1}, 0, 0, false, true},
		{"releases still coming, within the release window: wait", windowState{keys: keysN(3)}, 3 * s, 0, true, false},
		{"releases still coming, the release window over: act", windowState{keys: keysN(3)}, 4 * s, 0, true, true},
		{"releases and new demand still coming: wait past the release window", windowState{keys: keysN(3)}, 4 * s, 0, false, false},
	} {
		if got := windowCloses(tc.st, tc.open, tc.quiet, tc.releasesOnly, o); got != tc.want {
			t.Errorf("%s: closes = %v, want %v", tc.name, got, tc.want)
		}
	}
	o.MaxBatch = 0
	if windowCloses(windowState{keys: keysN(5000)}, s, 0, false, o) {
		t.Error("no batch bound: the number of claims alone must not close the window")
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

func TestArrivedSince(t *testing.T) {
	alloc := func(uids ...string) map[string]bool {
		m := map[string]bool{}
		for _, u := range uids {
			m[u] = true
		}
		return m
	}
	seen := map[string]bool{"claim:0": true}
	for _, tc := range []struct {
		name       string
		prev, next windowState
		want       [2]bool // demand, released
	}{
		{"nothing new", windowState{keys: keysN(1), allocated: alloc("a")}, windowState{keys: keysN(1), allocated: alloc("a")}, [2]bool{false, false}},
		{"a new claim", windowState{keys: keysN(1)}, windowState{keys: keysN(2)}, [2]bool{true, false}},
		{"the same claim again", windowState{keys: keysN(2)}, windowState{keys: keysN(2)}, [2]bool{false, false}},
		{"a pod's claim not projectable", windowState{}, windowState{unknown: 1}, [2]bool{true, false}},
		{"an allocation released", windowState{allocated: alloc("a", "b")}, windowState{allocated: alloc("b")}, [2]bool{false, true}},
		{"a claim allocated (not a release)", windowState{allocated: alloc("b")}, windowState{allocated: alloc("a", "b")}, [2]bool{false, false}},
		{"a claim and a release", windowState{keys: keysN(2), allocated: alloc("a")}, windowState{keys: keysN(3)}, [2]bool{true, true}},
	} {
		if d, r := arrivedSince(tc.prev, tc.next, seen); [2]bool{d, r} != tc.want {
			t.Errorf("%s: demand, released = %v, %v, want %v", tc.name, d, r, tc.want)
		}
	}
}

func TestWindowWithHolding(t *testing.T) {
	st := windowState{keys: keysN(3)}
	o := Options{BatchWindow: 2 * time.Second, LiveOptions: LiveOptions{MaxWindow: 30 * time.Second}}
	quiet := 2500 * time.Millisecond
	if !windowCloses(st, 10*time.Second, quiet, false, o.window()) {
		t.Error("holding off: the window closes once BatchWindow passed without demand")
	}
	o.Hold = 200 * time.Second
	if windowCloses(st, 10*time.Second, quiet, false, o.window()) {
		t.Errorf("holding on: demand quiet for %s, before the holder counts it as stopped (%s): the window must stay open", quiet, hold.DefaultMinQuiet)
	}
	if !windowCloses(st, 10*time.Second, hold.DefaultMinQuiet, false, o.window()) {
		t.Error("holding on: quiet for the holder's MinQuiet: the window closes")
	}
	o.BatchWindow = 5 * time.Second
	if windowCloses(st, 10*time.Second, hold.DefaultMinQuiet, false, o.window()) {
		t.Error("a BatchWindow longer than MinQuiet stays in force")
	}
}

// A pass that leaves claims out for the batch bound leaves a backlog the
// next window does not wait on; once the claims pending no longer fill a
// batch, the window waits again.
func TestWindowSeesBacklog(t *testing.T) {
	e := newEnv(t, Options{MaxBatch: 2}, node("n1"), slice("n1", 8), class(),
		aged("c1", 1, 0), aged("c2", 1, 1), aged("c3", 1, 2), aged("c4", 1, 3), aged("c5", 1, 4))
	c := &Controller{Reconciler: e.r}
	if c.windowState().backlog {
		t.Fatal("no pass yet: no backlog")
	}
	if res := e.pass(t); !res.Requeue {
		t.Fatalf("the first pass took %d of 5 claims and left none out; want 2 and a requeue", res.Solved)
	}
	e.waitCache(t, "two claims allocated", func(s *Snapshot) bool { return len(ours(s, "")) == 3 })
	if !c.windowState().backlog {
		t.Fatal("3 claims pending, the batch bound 2, claims left out: want a backlog")
	}
	e.pass(t)
	e.waitCache(t, "four claims allocated", func(s *Snapshot) bool { return len(ours(s, "")) == 1 })
	if c.windowState().backlog {
		t.Fatal("1 claim pending, the batch bound 2: no backlog")
	}
}
