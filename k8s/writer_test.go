package k8s

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// Pods ready while a batch is written are ungated as a group, their claims
// verified together; when that fails, claim by claim: only the claim that
// another writer's allocation (made after the batch was re-checked)
// conflicts with is withdrawn, and only its pod stays gated.
func TestUngateGroupWithdrawsOnlyTheConflict(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{Identity: "me"}, node("n1"), slice("n1", 3), class(), claim("a", 1, nil), claim("b", 1, nil),
		gatedPod("pa", "a"), gatedPod("pb", "b"))
	base := e.r.cachedAllocations()
	written := map[string]*resourceapi.ResourceClaim{}
	for n, dev := range map[string]string{"a": "gpu-0", "b": "gpu-1"} {
		w, err := e.r.write(ctx, e.claim(t, n), onDevice(dev))
		if err != nil {
			t.Fatal(err)
		}
		written["default/"+n] = w
	}
	other := claim("other", 1, nil)
	other.Status.Allocation = onDevice("gpu-1")
	if _, err := e.client.ResourceV1().ResourceClaims("default").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := e.r.Cache.Claims.ResourceClaims("default").Get("other"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never saw the other claim")
		}
	}
	e.r.ungated = map[string]bool{}
	var mu sync.Mutex
	var res PassResult
	e.r.ungateGroup(ctx, []readyPod{{e.pod(t, "pa"), []string{"a"}}, {e.pod(t, "pb"), []string{"b"}}}, &mu, written, base, &res)
	if res.Ungated != 1 || res.Withdrawn != 1 {
		t.Errorf("ungated %d, withdrawn %d; want 1 and 1", res.Ungated, res.Withdrawn)
	}
	if hasGate(e.pod(t, "pa")) || !hasGate(e.pod(t, "pb")) {
		t.Errorf("pa gated %v, pb gated %v; want pa ungated, pb gated", hasGate(e.pod(t, "pa")), hasGate(e.pod(t, "pb")))
	}
	if e.claim(t, "a").Status.Allocation == nil || e.claim(t, "b").Status.Allocation != nil {
		t.Errorf("a allocated %v, b allocated %v; want a kept, b withdrawn", e.claim(t, "a").Status.Allocation != nil, e.claim(t, "b").Status.Allocation != nil)
	}
	if got := counterValue(t, e.r.Metrics.CheckRejections); got != 1 {
		t.Errorf("check rejections %v, want 1", got)
	}
	e.allFeasible(t)
}

// verifyAll, which checks a group at once, gives every claim the verdict
// verify gives it alone, on random groups of written claims over four GPUs
// (some taken by another claim, some picked twice).
func TestVerifyAllAgreesWithVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"c0", "c1", "c2", "c3"}
	objs := []runtime.Object{node("n1"), slice("n1", 4), class()}
	for _, n := range names {
		objs = append(objs, claim(n, 1, nil))
	}
	taken := claim("taken", 1, nil)
	taken.Status.Allocation = onDevice("gpu-3")
	objs = append(objs, taken)
	e := newEnv(t, Options{}, objs...)
	failures := 0
	for round := range 40 {
		written := map[string]*resourceapi.ResourceClaim{}
		var group []*resourceapi.ResourceClaim
		for _, n := range names {
			if rng.IntN(4) == 0 {
				continue
			}
			c := e.claim(t, n).DeepCopy()
			c.Status.Allocation = onDevice(fmt.Sprintf("gpu-%d", rng.IntN(4)))
			written["default/"+n] = c
			group = append(group, c)
		}
		got := e.r.verifyAll(written, group)
		for _, c := range group {
			alone := e.r.verify(written, c)
			if (alone == nil) != (got[claimKey(c)] == nil) {
				t.Errorf("round %d, claim %s on %s: alone %v, in the group %v", round, c.Name, c.Status.Allocation.Devices.Results[0].Device, alone, got[claimKey(c)])
			}
			if alone != nil {
				failures++
			}
		}
	}
	if failures == 0 {
		t.Error("no claim ever failed: the rounds test nothing")
	}
}
