package k8s

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/hold"
	"github.com/drasat/drasat/input"
)

// holdEnv: one node of 8 GPUs, a pending claim for four and one for a
// single GPU (standalone, managed), created at created, and a controller
// with --hold=30s that has seen 60 one-GPU claims arrive in the last 20 s.
// Both fit now, but the forecast one-GPU claims would fill the node: holding
// the large one gains three claims.
func holdEnv(t *testing.T, created time.Time) *env {
	managed := map[string]string{ManagedLabel: "true"}
	big, small := claim("big", 4, managed), claim("small", 1, managed)
	big.CreationTimestamp = metav1.NewTime(created)
	small.CreationTimestamp = metav1.NewTime(created)
	e := newEnv(t, Options{Hold: 30 * time.Second, Policy: "binpack"}, node("n1"), slice("n1", 8), class(), big, small)
	e.r.holder = hold.New(hold.Options{MaxHold: 30 * time.Second, Seed: 1})
	now := time.Now()
	for i := range 60 {
		c := claim(fmt.Sprintf("old-%d", i), 1, managed)
		e.r.holder.Observe(now.Add(-20*time.Second+time.Duration(i)*time.Second/3), "old-"+fmt.Sprint(i), c)
	}
	return e
}

func TestHoldKeepsLargeClaimPendingForForecastDemand(t *testing.T) {
	e := holdEnv(t, time.Now())
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Held != 1 || res.Allocated != 1 || res.Unallocated != 0 {
		t.Fatalf("result %+v, want 1 held, 1 allocated, none unallocatable", res)
	}
	if e.claim(t, "small").Status.Allocation == nil {
		t.Fatal("the small claim was not allocated")
	}
	big := e.claim(t, "big")
	if big.Status.Allocation != nil || big.Annotations[UnallocatableAnnotation] != "" {
		t.Fatalf("held claim: allocation %v, annotation %q; want pending, not marked unallocatable", big.Status.Allocation, big.Annotations[UnallocatableAnnotation])
	}
	if e.r.plan == nil || e.r.plan.recheck.IsZero() || !e.r.plan.recheck.Equal(e.r.holdRecheck) {
		t.Fatalf("plan recheck %v, holder's %v: the held claim must be due again", e.r.plan.recheck, e.r.holdRecheck)
	}
	if got := gaugeValue(t, e.r.Metrics.HeldClaims); got != 1 {
		t.Fatalf("drasat_held_claims %v, want 1", got)
	}
	// While the plan holds, a pass writes nothing new; once the recheck is
	// due the held claim is decided again (still held: the forecast is
	// unchanged and the small claim's GPU is taken).
	e.r.plan.recheck = time.Now().Add(-time.Millisecond)
	if e.r.plan.covers(nil, e.r.plan.inventory, e.r.plan.releaseEpoch) {
		t.Fatal("a plan past its recheck still covers")
	}
	// The big claim (4 GPUs) was held from the first pass to the second:
	// 4 devices times the time between them.
	if e.r.heldDevices != 4 {
		t.Fatalf("held devices %d, want the big claim's 4", e.r.heldDevices)
	}
	first := e.r.heldSince
	if _, err := e.r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	between := e.r.heldSince.Sub(first).Seconds()
	if got := counterValue(t, e.r.Metrics.HeldDeviceSeconds); got != 4*between || got <= 0 {
		t.Fatalf("drasat_held_device_seconds_total %v, want 4 devices x %v s", got, between)
	}
	e.allFeasible(t)
}

func TestHoldBoundedAndOffByDefault(t *testing.T) {
	// First seen longer ago than --hold: admitted at once.
	e := holdEnv(t, time.Now().Add(-time.Minute))
	if _, err := e.r.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.claim(t, "big").Status.Allocation == nil {
		t.Fatal("a claim pending longer than --hold was held again")
	}
	e.allFeasible(t)

	// Without --hold nothing is held.
	managed := map[string]string{ManagedLabel: "true"}
	e = newEnv(t, Options{Policy: "binpack"}, node("n1"), slice("n1", 4), class(), claim("big", 4, managed))
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Held != 0 || res.Allocated != 1 || e.r.holder != nil {
		t.Fatalf("result %+v without --hold, want the claim allocated", res)
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// A held stand-in: pod big (4 GPUs, no claim yet) is held for forecast
// one-GPU claims. When its claim appears while the plan holds, the pass
// writes nothing, solves nothing, and counts the claim as decided in its
// first pass (drasat_passes_to_first_try).
func TestHeldStandInsClaimIsDecided(t *testing.T) {
	e := newEnv(t, Options{Hold: 30 * time.Second, Policy: "binpack"}, node("n1"), slice("n1", 4), class(),
		template("four", 4), templatePod("big", "four"))
	e.r.holder = hold.New(hold.Options{MaxHold: 30 * time.Second, Seed: 1})
	now := time.Now()
	for i := range 60 {
		e.r.holder.Observe(now.Add(-20*time.Second+time.Duration(i)*time.Second/3), "old-"+fmt.Sprint(i), claim(fmt.Sprint("old-", i), 1, nil))
	}
	res := e.pass(t)
	if res.Held != 1 || res.Projected != 1 || res.Unallocated != 0 {
		t.Fatalf("first pass %+v: want the stand-in held", res)
	}
	solves := histogramCount(t, e.r.Metrics.SolveSeconds)
	e.materialize(t, "big", 4)
	res = e.pass(t)
	if res.Held != 1 || res.Allocated != 0 || res.Unallocated != 0 {
		t.Fatalf("second pass %+v: want big's claim held, nothing written", res)
	}
	if n := histogramCount(t, e.r.Metrics.SolveSeconds); n != solves {
		t.Errorf("the plan held, yet the pass solved again")
	}
	if n := histogramCount(t, e.r.Metrics.PassesToFirstTry); n != 1 {
		t.Errorf("passes-to-first-try observed %d claims, want big's claim decided", n)
	}
	if c := e.claim(t, "big-gpu-abcde"); c.Status.Allocation != nil || c.Annotations[UnallocatableAnnotation] != "" {
		t.Errorf("held claim written or marked unallocatable")
	}
}

// --hold-idle-per-claim: at 1 s of idle device per claim gained, the three
// claims holding the large claim gains do not pay for its 4 devices left
// idle while the forecast claims that take their room arrive (about 4 s,
// half of it on average: 7.7 device-seconds): both claims are allocated
// now, and drasat_holds_declined_total counts it.
func TestHoldDeclinedWhenIdleCostsMore(t *testing.T) {
	e := holdEnv(t, time.Now())
	e.r.Opts.HoldIdle = time.Second
	e.r.holder = hold.New(hold.Options{MaxHold: 30 * time.Second, IdlePerClaim: e.r.Opts.HoldIdle, Seed: 1})
	now := time.Now()
	for i := range 60 {
		c := claim(fmt.Sprintf("old-%d", i), 1, nil)
		e.r.holder.Observe(now.Add(-20*time.Second+time.Duration(i)*time.Second/3), "old-"+fmt.Sprint(i), c)
	}
	res := e.pass(t)
	if res.Held != 0 || res.Allocated != 2 {
		t.Fatalf("result %+v, want both allocated, none held", res)
	}
	if got := counterValue(t, e.r.Metrics.HoldsDeclined); got != 1 {
		t.Fatalf("drasat_holds_declined_total %v, want 1", got)
	}
	e.allFeasible(t)

	// The option reaches the holder a pass creates.
	e = newEnv(t, Options{Hold: 30 * time.Second, HoldIdle: 7 * time.Second, Policy: "binpack"}, node("n1"), slice("n1", 4), class(),
		claim("c", 1, map[string]string{ManagedLabel: "true"}))
	e.pass(t)
	if e.r.holder == nil || e.r.holder.Options().IdlePerClaim != 7*time.Second {
		t.Fatalf("holder %v: want IdlePerClaim from Options.HoldIdle", e.r.holder)
	}
}

// A pod's claim arrives with its pod, not when the resourceclaim
// controller gets to create it: a burst's claims come tens of seconds
// after their pods, and timed by them the burst would look like a stream.
func TestHoldObservesPodClaimsAtThePodsCreation(t *testing.T) {
	podAt := time.Now().Add(-40 * time.Second).Truncate(time.Second)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "pod-uid", CreationTimestamp: metav1.NewTime(podAt)}}
	own := claim("p-gpu", 1, nil)
	own.CreationTimestamp = metav1.NewTime(podAt.Add(30 * time.Second))
	own.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "pod-uid", Controller: ptr.To(true)}}
	alone := claim("standalone", 1, nil)
	alone.CreationTimestamp = metav1.NewTime(podAt.Add(35 * time.Second))
	r := &Reconciler{Opts: Options{Hold: time.Minute}}
	dem := &demand{keys: map[string]string{}}
	r.holdObjects(&input.Objects{Pods: []*corev1.Pod{p}}, []*resourceapi.ResourceClaim{own, alone}, dem, time.Now())
	if got := r.holder.Since(dem.key(own)); !got.Equal(podAt) {
		t.Errorf("the pod's claim arrived at %v, want its pod's creation %v", got, podAt)
	}
	if got, want := r.holder.Since(dem.key(alone)), alone.CreationTimestamp.Time; !got.Equal(want) {
		t.Errorf("the standalone claim arrived at %v, want its creation %v", got, want)
	}
}
