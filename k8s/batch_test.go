package k8s

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestBatchBoundLearntFromSolverCost(t *testing.T) {
	r := &Reconciler{Opts: Options{Timeout: 10 * time.Second}}
	if r.maxBatch() != 0 {
		t.Fatal("no bound before any solve")
	}
	r.adaptBatch(1000, true, 0, 2*time.Second)
	if r.maxBatch() != 0 {
		t.Error("a proven solve set a bound")
	}
	r.adaptBatch(1000, false, 0.01, 10*time.Second)
	if r.maxBatch() != 0 {
		t.Error("a solve out of budget with a gap within 5 % set a bound")
	}
	r.adaptBatch(1000, false, 0.2, 10*time.Second)
	if r.maxBatch() != 500 {
		t.Errorf("a solve out of budget with a 20 %% gap: bound %d, want 500", r.maxBatch())
	}
	r.adaptBatch(500, false, 0.2, 10*time.Second)
	r.adaptBatch(250, false, 0.2, 10*time.Second)
	r.adaptBatch(125, false, 0.2, 10*time.Second)
	if r.maxBatch() != minAdaptiveBatch {
		t.Errorf("bound %d, want the floor %d", r.maxBatch(), minAdaptiveBatch)
	}
	r.adaptBatch(64, true, 0, time.Second)
	if r.maxBatch() != 128 {
		t.Errorf("a fast proven solve: bound %d, want doubled to 128", r.maxBatch())
	}
	r.adaptBatch(50, true, 0, time.Second)
	if r.maxBatch() != 0 {
		t.Errorf("a fast proven solve well below the bound: bound %d, want none", r.maxBatch())
	}
	r.Opts.MaxBatch = 300
	if r.maxBatch() != 300 {
		t.Error("--max-batch ignored")
	}
}

// The bound learnt from the passes' time: a pass longer than a third of
// --stuck-after bounds the next batches in proportion, never below the
// floor; passes within half of that double it until it no longer binds;
// the least of the bounds applies.
func TestBatchBoundLearntFromPassTime(t *testing.T) {
	r := &Reconciler{Opts: Options{Timeout: 10 * time.Second, StuckAfter: 75 * time.Second}}
	r.adaptBatchToTime(677, 20*time.Second)
	if r.maxBatch() != 0 {
		t.Fatalf("a pass within 25 s set bound %d", r.maxBatch())
	}
	r.adaptBatchToTime(677, 100*time.Second) // the 1,000-node pass that lost its Lease
	if want := 677 * 25 / 100; r.maxBatch() != want {
		t.Fatalf("a 100 s pass of 677 claims: bound %d, want %d (25 s worth)", r.maxBatch(), want)
	}
	r.adaptBatchToTime(1, 38*time.Second) // a first pass building the memo
	if r.maxBatch() != minAdaptiveBatch {
		t.Fatalf("a slow pass of one claim: bound %d, want the floor %d", r.maxBatch(), minAdaptiveBatch)
	}
	r.adaptBatchToTime(64, 20*time.Second)
	if r.maxBatch() != minAdaptiveBatch {
		t.Fatalf("a pass of 20 s (between half the target and the target): bound %d, want it kept", r.maxBatch())
	}
	r.adaptBatchToTime(64, 10*time.Second)
	if r.maxBatch() != 128 {
		t.Fatalf("a pass of 10 s: bound %d, want doubled to 128", r.maxBatch())
	}
	r.batchLimit = 100 // from the solver's cost
	if r.maxBatch() != 100 {
		t.Fatalf("bound %d, want the lesser, 100", r.maxBatch())
	}
	r.batchLimit = 0
	r.adaptBatchToTime(50, 5*time.Second)
	if r.maxBatch() != 0 {
		t.Fatalf("a fast pass well below the bound: bound %d, want none", r.maxBatch())
	}
}

// A pass learns the bound from its own time: with a --stuck-after so short
// that any pass is too long, the pass after one of 100 claims solves the
// floor's worth.
func TestPassBoundedByItsTime(t *testing.T) {
	objs := []runtime.Object{node("n1"), slice("n1", 8), class()}
	for i := range 100 {
		objs = append(objs, aged(fmt.Sprintf("c%03d", i), 1, i))
	}
	e := newEnv(t, Options{StuckAfter: 3 * time.Millisecond}, objs...)
	if res := e.pass(t); res.Solved != 100 || res.Allocated != 8 {
		t.Fatalf("first pass %+v, want all 100 solved, 8 allocated", res)
	}
	e.waitCache(t, "8 allocations", func(s *Snapshot) bool {
		n := 0
		for _, c := range s.Claims {
			if c.Status.Allocation != nil {
				n++
			}
		}
		return n == 8
	})
	e.create(t, aged("new", 1, 200)) // new demand: the pass solves again
	e.waitCache(t, "the new claim", func(s *Snapshot) bool { return len(s.Claims) == 101 })
	if res := e.pass(t); res.Solved != minAdaptiveBatch || !res.Requeue {
		t.Fatalf("second pass %+v, want %d solved (the floor) and the rest requeued", res, minAdaptiveBatch)
	}
	e.allFeasible(t)
}

// With the client's rate known, a batch holds at most the claims whose
// writes fit in what the last solve left of a third of --stuck-after
// (half of it before any solve), three requests each; --max-batch and
// the learnt bounds apply below it.
func TestBatchBoundByWriteRate(t *testing.T) {
	r := &Reconciler{Opts: Options{Timeout: 10 * time.Second, StuckAfter: 75 * time.Second, KubeAPIQPS: 50}}
	if r.writeBatch() != 208 {
		t.Fatalf("bound %d before any solve, want 208 (half of 25 s at 50 requests a second, 3 a claim)", r.writeBatch())
	}
	if r.maxBatch() != 0 {
		t.Fatalf("claims and stand-ins bounded to %d by the writes; want no bound (stand-ins are not written)", r.maxBatch())
	}
	r.lastSolve = 10 * time.Second
	if r.writeBatch() != 250 {
		t.Fatalf("bound %d after a 10 s solve, want 250 (the 15 s it leaves at 50 requests a second)", r.writeBatch())
	}
	r.lastSolve = 30 * time.Second
	if r.writeBatch() != minAdaptiveBatch {
		t.Fatalf("bound %d after a solve longer than the target, want the floor %d", r.writeBatch(), minAdaptiveBatch)
	}
	r.lastSolve = 0
	r.Opts.MaxBatch = 200
	if r.writeBatch() != 200 || r.maxBatch() != 200 {
		t.Fatalf("bounds %d (claims) and %d (with stand-ins) with --max-batch=200", r.writeBatch(), r.maxBatch())
	}
	r.Opts.MaxBatch, r.Opts.KubeAPIQPS = 0, 1
	if r.writeBatch() != minAdaptiveBatch {
		t.Fatalf("bound %d at one request a second, want the floor %d", r.writeBatch(), minAdaptiveBatch)
	}
	r.Opts.KubeAPIQPS = 0
	if r.writeBatch() != 0 {
		t.Fatalf("bound %d with the rate unknown, want none", r.writeBatch())
	}
}

// The write bound (writeBatch) bounds a pass's claims, which it writes;
// the stand-ins, written only once their claims exist, are bounded by
// maxBatch alone. At a client rate that leaves the write bound at its
// floor (64), a pass over 70 claims and 100 pods whose claims do not
// exist yet solves 64 claims and all 100 stand-ins. With the write bound
// on the stand-ins too, the 1,000-pod burst of the load test saw 208 of
// its pods in its first pass and bound 472 of 602.
func TestPassBoundsStandInsByMaxBatchOnly(t *testing.T) {
	objs := []runtime.Object{node("n1"), slice("n1", 300), class(), template("one", 1)}
	for i := range 70 {
		n := fmt.Sprintf("c%02d", i)
		objs = append(objs, claim(n, 1, nil), gatedPod("p"+n, n))
	}
	for i := range 100 {
		objs = append(objs, templatePod(fmt.Sprintf("s%03d", i), "one"))
	}
	e := newEnv(t, Options{KubeAPIQPS: 0.5}, objs...)
	if got := e.r.writeBatch(); got != minAdaptiveBatch {
		t.Fatalf("write bound %d, want its floor %d", got, minAdaptiveBatch)
	}
	if got := e.r.maxBatch(); got != 0 {
		t.Fatalf("batch bound %d before any pass, want none", got)
	}
	res := e.pass(t)
	if res.Solved != minAdaptiveBatch || res.Projected != 100 || !res.Requeue {
		t.Fatalf("pass %+v: want %d claims solved, 100 stand-ins, the rest requeued", res, minAdaptiveBatch)
	}
	e.allFeasible(t)
}

// A pass stops writing at its target (a third of --stuck-after) once the
// write bound's floor is written, and only between pods: the rest stays
// pending for the next pass, which takes it first. Here the target (1 ms)
// is past before the first write and the write bound does not bind (a
// fast client), so the first pass writes 22 pods of three claims (66:
// the floor, 64, rounded up to a whole pod) and defers the other 12 pods.
// Then 22 more pods arrive, and the next pass, bounded to 64 claims by
// the first one's time, takes the 12 deferred pods before them.
func TestPassStopsWritingAtItsTarget(t *testing.T) {
	pods := func(from, to int) []runtime.Object {
		var objs []runtime.Object
		for i := from; i < to; i++ {
			var names []string
			for j := range 3 {
				n := fmt.Sprintf("c%02d-%d", i, j)
				objs = append(objs, claim(n, 1, nil))
				names = append(names, n)
			}
			objs = append(objs, gatedPod(fmt.Sprintf("p%02d", i), names...))
		}
		return objs
	}
	objs := append([]runtime.Object{node("n1"), slice("n1", 200), class()}, pods(0, 34)...)
	e := newEnv(t, Options{StuckAfter: 3 * time.Millisecond, KubeAPIQPS: 1e6}, objs...)
	allocated := func(want int) func(*Snapshot) bool {
		return func(s *Snapshot) bool {
			n := 0
			for _, c := range s.Claims {
				if c.Status.Allocation != nil {
					n++
				}
			}
			return n == want
		}
	}
	res := e.pass(t)
	if res.Solved != 102 || res.Allocated != 66 || res.Deferred != 36 || res.Ungated != 22 || !res.Requeue {
		t.Fatalf("first pass %+v, want 102 solved, 66 written (22 pods), 36 deferred, requeued", res)
	}
	if got := counterValue(t, e.r.Metrics.DeferredClaims); got != 36 {
		t.Errorf("drasat_deferred_claims_total %v, want 36", got)
	}
	e.waitCache(t, "66 allocations", allocated(66))
	for _, o := range pods(34, 56) {
		e.create(t, o)
	}
	e.waitCache(t, "the new claims", func(s *Snapshot) bool { return len(s.Claims) == 168 })
	res = e.pass(t)
	if res.Allocated < 36 {
		t.Fatalf("second pass %+v, want the 36 deferred claims written first", res)
	}
	e.waitCache(t, "the second pass's writes", allocated(66+res.Allocated))
	list, err := e.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if n, _ := strconv.Atoi(p.Name[1:]); n < 34 && hasGate(&p) {
			t.Errorf("pod %s, deferred by the first pass, still gated after the second", p.Name)
		}
	}
	e.allFeasible(t)
}

// reconcile --once has no next pass: its one pass writes everything it
// solved, past the target too.
func TestOnePassWritesPastItsTarget(t *testing.T) {
	objs := []runtime.Object{node("n1"), slice("n1", 102), class()}
	for i := range 34 {
		names := []string{fmt.Sprintf("c%02d-0", i), fmt.Sprintf("c%02d-1", i), fmt.Sprintf("c%02d-2", i)}
		for _, n := range names {
			objs = append(objs, claim(n, 1, nil))
		}
		objs = append(objs, gatedPod(fmt.Sprintf("p%02d", i), names...))
	}
	e := newEnv(t, Options{StuckAfter: 3 * time.Millisecond, KubeAPIQPS: 1e6}, objs...)
	res, err := (&Controller{Reconciler: e.r}).Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Allocated != 102 || res.Deferred != 0 {
		t.Fatalf("reconcile --once %+v, want all 102 written, none deferred", res)
	}
	e.allFeasible(t)
}

// Claims no gated pod waits for (standalone claims) are split anywhere
// past the floor: the first pass writes 64 of 100 and defers 36.
func TestPassStopsWritingStandaloneClaims(t *testing.T) {
	objs := []runtime.Object{node("n1"), slice("n1", 100), class()}
	for i := range 100 {
		objs = append(objs, aged(fmt.Sprintf("c%03d", i), 1, i))
	}
	e := newEnv(t, Options{StuckAfter: 3 * time.Millisecond, KubeAPIQPS: 1e6}, objs...)
	if res := e.pass(t); res.Allocated != minAdaptiveBatch || res.Deferred != 100-minAdaptiveBatch || !res.Requeue {
		t.Fatalf("first pass %+v, want %d written, %d deferred, requeued", res, minAdaptiveBatch, 100-minAdaptiveBatch)
	}
	e.allFeasible(t)
}
