package reserve

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// The fixture is examples/mig-a100: two nodes with two A100-40GB GPUs each.
func cluster(t *testing.T) *input.Objects {
	t.Helper()
	paths, _ := filepath.Glob("../examples/mig-a100/[012]*.yaml")
	objs, _, err := input.Load(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// gpus is a claim for count whole GPUs.
func gpus(name string, count int) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: int64(count),
				AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}
}

// replay runs a small life of the cluster, one batch per step. Every
// one-GPU claim runs two steps, and on each node one ends at every step:
// four run at the start (one per GPU, ending at step 1 or 2 on each node),
// and from step 1 on two arrive at every step. A two-GPU claim (it needs a
// whole node) arrives at step 0. At every step each node has one GPU
// free: two GPUs are free in the cluster, never two on one node, and the
// small claims arriving take them, unless a node is kept for the large
// claim. It returns the step at which the large claim was allocated, or -1.
func replay(t *testing.T, rv *Reserver, steps, leaveOut int) int {
	t.Helper()
	base := cluster(t)
	type running struct {
		c   *resourceapi.ResourceClaim
		end int
	}
	var run []running
	{
		objs := *base
		for i := 0; i < 4; i++ {
			objs.Claims = append(objs.Claims, gpus(fmt.Sprintf("init-%d", i), 1))
		}
		out := solve(t, &objs, nil, 0)
		if len(out) != 4 {
			t.Fatalf("initial claims: %d allocated, want 4", len(out))
		}
		perPool := map[string]int{}
		for _, c := range out {
			pool := c.Status.Allocation.Devices.Results[0].Pool
			perPool[pool]++
			run = append(run, running{c, perPool[pool]}) // ends at 1, then 2, on each node
		}
		if len(perPool) != 2 {
			t.Fatalf("initial claims on %d nodes, want 2", len(perPool))
		}
	}
	pending := []*resourceapi.ResourceClaim{gpus("large", 2)}
	for step := 0; step < steps; step++ {
		var keep []running
		for _, r := range run {
			if r.end > step {
				keep = append(keep, r)
			}
		}
		run = keep
		if step > 0 {
			pending = append(pending, gpus(fmt.Sprintf("small-%d-a", step), 1), gpus(fmt.Sprintf("small-%d-b", step), 1))
		}
		objs := *base
		objs.Claims = nil
		for _, r := range run {
			objs.Claims = append(objs.Claims, r.c)
		}
		for _, c := range pending {
			if c.Name == "large" && step == leaveOut {
				continue // the batch leaves it out (the controller parks such claims)
			}
			objs.Claims = append(objs.Claims, c)
		}
		admitted := map[string]bool{}
		for _, c := range solve(t, &objs, rv, step) {
			admitted[c.Name] = true
			run = append(run, running{c, step + 2})
			if c.Name == "large" {
				return step
			}
		}
		var still []*resourceapi.ResourceClaim
		for _, c := range pending {
			if !admitted[c.Name] {
				still = append(still, c)
			}
		}
		pending = still
	}
	return -1
}

// solve allocates the pending claims of objs (binpack, the reservation
// when rv is given), checks the result independently and returns the
// claims allocated.
func solve(t *testing.T, objs *input.Objects, rv *Reserver, step int) []*resourceapi.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	p, err := model.Build(ctx, objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rv != nil {
		if _, err := rv.Apply(ctx, objs, p, time.Unix(int64(step), 0)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	var out []*resourceapi.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation != nil {
			out = append(out, c)
		}
	}
	if err := check.Check(objs, out, check.Options{}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Without a reservation the two-GPU claim starves: every GPU that frees
// goes to the small claim arriving with it. With one, a node drains and
// the large claim is allocated.
func TestReservationAdmitsTheLargeClaim(t *testing.T) {
	const steps = 12
	if got := replay(t, nil, steps, -1); got >= 0 {
		t.Fatalf("without reservation the large claim was allocated at step %d: the instance does not starve it", got)
	}
	got := replay(t, New(), steps, -1)
	if got < 0 {
		t.Fatalf("with the reservation the large claim still starves over %d steps", steps)
	}
	// It waited one batch (step 0) and a node is kept from step 1 on; no
	// new claim goes there, and its last initial claim ends at step 2.
	if got != 2 {
		t.Fatalf("large claim allocated at step %d, want 2", got)
	}
	// Left out of the batch at step 2, when its node drains, the claim
	// keeps the node and takes it at step 3.
	if got := replay(t, New(), steps, 2); got != 3 {
		t.Fatalf("left out of the batch at step 2: large claim allocated at step %d, want 3", got)
	}
}

// A claim seen in one batch only causes no reservation (the dropping
// replay), claims that fit alone do not either, nor a claim that waits
// because the cluster is full.
func TestNoReservationWithoutWait(t *testing.T) {
	ctx := context.Background()
	objs := cluster(t)
	objs.Claims = []*resourceapi.ResourceClaim{gpus("a", 2), gpus("b", 2), gpus("c", 2)}
	p, err := model.Build(ctx, objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rv := New()
	if r, err := rv.Apply(ctx, objs, p, time.Time{}); err != nil || r.Claim != "" {
		t.Fatalf("first batch: %v, %v; want no reservation", r, err)
	}
	// Same claims again: they waited, but each fits alone on the empty
	// cluster.
	p, _ = model.Build(ctx, objs, model.Options{})
	if r, err := rv.Apply(ctx, objs, p, time.Time{}); err != nil || r.Claim != "" {
		t.Fatalf("second batch: %v, %v; want no reservation (every claim fits alone)", r, err)
	}
	// Every GPU taken: the two-GPU claim waits for any departure, no node
	// is kept for it.
	full := cluster(t)
	for i := 0; i < 4; i++ {
		full.Claims = append(full.Claims, gpus(fmt.Sprintf("init-%d", i), 1))
	}
	p, _ = model.Build(ctx, full, model.Options{})
	res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	allocated, _ := alloc.Allocated(p, res)
	full.Claims = append(allocated, gpus("wide", 2))
	rvFull := New()
	for i := 0; i < 2; i++ {
		p, _ = model.Build(ctx, full, model.Options{})
		if r, err := rvFull.Apply(ctx, full, p, time.Time{}); err != nil || r.Claim != "" {
			t.Fatalf("batch %d on a full cluster: %v, %v; want no reservation", i, r, err)
		}
	}
	// A claim larger than any node fits nowhere even drained: no node is
	// kept for it.
	objs.Claims = []*resourceapi.ResourceClaim{gpus("huge", 3)}
	for i := 0; i < 2; i++ {
		p, _ = model.Build(ctx, objs, model.Options{})
		if r, err := rv.Apply(ctx, objs, p, time.Time{}); err != nil || r.Claim != "" {
			t.Fatalf("batch %d with a claim no node can host: %v, %v; want no reservation", i, r, err)
		}
	}
}
