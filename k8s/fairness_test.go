package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var managed = map[string]string{ManagedLabel: "true"}

// aged is a managed claim created at second sec (creation order matters to
// batching).
func aged(name string, count int64, sec int) *resourceapi.ResourceClaim {
	c := claim(name, count, managed)
	c.CreationTimestamp = metav1.NewTime(time.Unix(int64(1000+sec), 0))
	return c
}

func (e *env) pass(t *testing.T) PassResult {
	t.Helper()
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// waitCache waits until the cache satisfies ok (informers are asynchronous).
func (e *env) waitCache(t *testing.T, what string, ok func(s *Snapshot) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s, err := e.r.Cache.Snapshot(); err == nil && ok(s) {
			return
		}
	}
	t.Fatalf("cache never showed %s", what)
}

func (e *env) create(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *resourceapi.ResourceClaim:
			_, err = e.client.ResourceV1().ResourceClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Node:
			_, err = e.client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceSlice:
			_, err = e.client.ResourceV1().ResourceSlices().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = e.client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("create %T: not supported", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A claim that fits nowhere alone is not solved again until the inventory
// changes; then it is.
func TestUnplaceableClaimParkedUntilInventoryChanges(t *testing.T) {
	e := newEnv(t, Options{}, node("n1"), slice("n1", 1), class(), aged("big", 2, 0))
	if res := e.pass(t); res.Solved != 1 || res.Unallocated != 1 {
		t.Fatalf("first pass %+v, want big solved and unallocatable", res)
	}
	res := e.pass(t)
	if res.Solved != 0 || res.Parked != 1 {
		t.Fatalf("second pass %+v, want nothing solved and big parked", res)
	}
	// More devices: a second slice on n1's pool would be a new pool; a new
	// node with two GPUs is simplest.
	e.create(t, node("n2"), slice("n2", 2))
	e.waitCache(t, "slice n2", func(s *Snapshot) bool { return len(s.Slices) == 2 })
	res = e.pass(t)
	if res.Solved != 1 || res.Allocated != 1 {
		t.Fatalf("pass after new slice %+v, want big solved and allocated", res)
	}
	e.allFeasible(t)
}

// A claim whose selector the pass ran out of time for is not parked: that
// says nothing about the claim, and the next pass (with the memo's answers
// so far) tries it again although nothing changed. It used to be parked
// like a claim that fits nowhere, and with no slice changed and no
// allocation released it was never tried again.
func TestClaimOutOfTimeNotParked(t *testing.T) {
	e := slowSelectorEnv(t)
	res := e.pass(t)
	if res.Allocated != 1 || res.Unallocated != 1 {
		t.Fatalf("first pass %+v, want quick allocated and slow out of time", res)
	}
	if why := e.claim(t, "slow").Annotations[UnallocatableAnnotation]; !strings.Contains(why, "time budget") {
		t.Fatalf("slow claim's reason %q; want the time budget", why)
	}
	e.waitCache(t, "quick allocated", func(s *Snapshot) bool {
		for _, c := range s.Claims {
			if c.Name == "quick" && c.Status.Allocation != nil {
				return true
			}
		}
		return false
	})
	if res := e.pass(t); res.Parked != 0 || res.Solved != 1 {
		t.Fatalf("second pass %+v, want slow solved again, nothing parked", res)
	}
	e.allFeasible(t)
}

// A claim parked because devices were taken is tried again once an
// allocation is released.
func TestParkedClaimRetriedAfterRelease(t *testing.T) {
	holder := claim("holder", 1, nil)
	holder.Status.Allocation = onN1()
	e := newEnv(t, Options{}, node("n1"), slice("n1", 1), class(), holder, aged("want", 1, 0))
	if res := e.pass(t); res.Unallocated != 1 {
		t.Fatalf("first pass %+v, want want unallocatable", res)
	}
	if res := e.pass(t); res.Solved != 0 || res.Parked != 1 {
		t.Fatalf("second pass %+v, want want parked", res)
	}
	if err := e.client.ResourceV1().ResourceClaims("default").Delete(context.Background(), "holder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitCache(t, "holder gone", func(s *Snapshot) bool { return len(s.Claims) == 1 })
	if res := e.pass(t); res.Allocated != 1 {
		t.Fatalf("pass after release %+v, want want allocated", res)
	}
	e.allFeasible(t)
}

// Starvation: with --max-batch, the oldest claims that cannot
// fit used to fill every batch, so a newer claim that fits was never tried.
// Now it is allocated within two passes.
func TestNewClaimNotStarvedByUnplaceableOldOnes(t *testing.T) {
	e := newEnv(t, Options{MaxBatch: 2}, node("n1"), slice("n1", 1), class(),
		aged("u1", 2, 0), aged("u2", 2, 1), aged("u3", 2, 2), aged("fits", 1, 3))
	for i := 0; i < 2 && e.claim(t, "fits").Status.Allocation == nil; i++ {
		e.pass(t)
	}
	if e.claim(t, "fits").Status.Allocation == nil {
		t.Fatal("claim that fits was not allocated within two passes")
	}
	// A claim created now is tried in the very next pass.
	e.create(t, aged("late", 2, 10))
	e.waitCache(t, "claim late", func(s *Snapshot) bool { return len(s.Claims) == 5 })
	e.pass(t)
	if got := e.r.fair.tried["uid-late"]; got != e.r.fair.pass {
		t.Fatalf("late claim last tried in pass %d, want the latest pass %d", got, e.r.fair.pass)
	}
	// Every claim was first tried within two passes of being seen.
	m := &dto.Metric{}
	if err := e.r.Metrics.PassesToFirstTry.Write(m); err != nil {
		t.Fatal(err)
	}
	h := m.GetHistogram()
	if h.GetSampleCount() != 5 {
		t.Fatalf("%d claims first tried, want 5", h.GetSampleCount())
	}
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == 1 && b.GetCumulativeCount() != 5 {
			t.Fatalf("%d of 5 claims first tried within one pass after being seen", b.GetCumulativeCount())
		}
	}
	e.allFeasible(t)
}

// Batches rotate: never tried first, then least recently tried.
func TestSelectBatchRotates(t *testing.T) {
	f := newFairness()
	var pending []*resourceapi.ResourceClaim
	for i, n := range []string{"a", "b", "c", "d", "e"} {
		pending = append(pending, aged(n, 1, i))
	}
	names := func(cs []*resourceapi.ResourceClaim) (s string) {
		for _, c := range cs {
			s += c.Name
		}
		return s
	}
	want := []string{"ab", "cd", "ea", "bc"}
	for i, w := range want {
		b, left := f.selectBatch(pending, nil, 2)
		if names(b) != w || left != len(pending)-2 {
			t.Fatalf("pass %d: batch %q (left out %d), want %q (%d)", i, names(b), left, w, len(pending)-2)
		}
		f.solved(b, nil)
		if i == 2 {
			// A new claim jumps the queue.
			pending = append(pending, aged("z", 1, 9))
			want[3] = "zb" // then b, tried longest ago
		}
	}
}

// Parallel writes: every pod's claims written, each pod ungated as soon as
// its claims were (by the writer, not the pass's final step), the state
// feasible.
func TestParallelWritesUngateEachPodEarly(t *testing.T) {
	objs := []runtime.Object{node("n1"), slice("n1", 8), class()}
	for i := 0; i < 4; i++ {
		a, b := string(rune('a'+2*i)), string(rune('a'+2*i+1))
		objs = append(objs, claim(a, 1, nil), claim(b, 1, nil), gatedPod("p"+a+b, a, b))
	}
	e := newEnv(t, Options{LiveOptions: LiveOptions{WriteWorkers: 3}}, objs...)
	res := e.pass(t)
	if res.Allocated != 8 || res.Ungated != 4 {
		t.Fatalf("pass %+v, want 8 allocated and 4 pods ungated", res)
	}
	if len(e.r.ungated) != 4 {
		t.Fatalf("%d pods ungated by the writer, want all 4 (as soon as their claims were written)", len(e.r.ungated))
	}
	for i := 0; i < 4; i++ {
		n := "p" + string(rune('a'+2*i)) + string(rune('a'+2*i+1))
		if hasGate(e.pod(t, n)) {
			t.Fatalf("pod %s still gated", n)
		}
	}
	e.allFeasible(t)
}

// A workload's claims are taken together and not split at the batch's end.
func TestSelectBatchKeepsWorkloadsTogether(t *testing.T) {
	f := newFairness()
	var pending []*resourceapi.ResourceClaim
	for i, n := range []string{"a", "b", "c", "d", "e"} {
		pending = append(pending, aged(n, 1, i))
	}
	// b and e belong to one ReplicaSet, c and d to another.
	owners := map[string]string{"uid-b": "rs1", "uid-e": "rs1", "uid-c": "rs2", "uid-d": "rs2"}
	names := func(cs []*resourceapi.ResourceClaim) (s string) {
		for _, c := range cs {
			s += c.Name
		}
		return s
	}
	b, left := f.selectBatch(pending, owners, 4)
	if names(b) != "abe" || left != 2 {
		t.Fatalf("batch %q (left out %d), want \"abe\" (2): rs1 together, rs2 not split", names(b), left)
	}
	f.solved(b, nil)
	if b, _ := f.selectBatch(pending, owners, 4); names(b) != "cda" {
		t.Fatalf("second batch %q, want \"cda\" (rs2 never tried, then a; rs1 does not fit whole)", names(b))
	}
}
