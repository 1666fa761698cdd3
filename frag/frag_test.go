package frag

import (
	"context"
	"errors"
	"math"
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

// The fixture is examples/mig-a100: two nodes with two A100-40GB GPUs each,
// every MIG placement published.
func loadA100(t *testing.T, claims ...*resourceapi.ResourceClaim) (*input.Objects, *model.Problem) {
	t.Helper()
	paths, _ := filepath.Glob("../examples/mig-a100/[012]*.yaml")
	objs, _, err := input.Load(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs.Claims = claims
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return objs, p
}

// claim asks for count devices of a MIG profile, or whole GPUs ("full").
func claim(name, profile string, count int) *resourceapi.ResourceClaim {
	req := resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: int64(count),
		AllocationMode: resourceapi.DeviceAllocationModeExactCount}}
	if profile != "full" {
		req.Exactly.DeviceClassName = "mig.nvidia.com"
		req.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: "device.attributes['gpu.nvidia.com'].profile == '" + profile + "'"}}}
	}
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}}
}

func workload(cs ...*resourceapi.ResourceClaim) *Workload {
	w := NewWorkload()
	for _, c := range cs {
		w.Observe(c)
	}
	return w
}

// device finds a device by name on node-1's pool.
func device(t *testing.T, p *model.Problem, pool, name string) int {
	t.Helper()
	for _, d := range p.Devices {
		if d.ID.Pool == pool && d.ID.Device == name {
			return d.Index
		}
	}
	t.Fatalf("no device %s/%s", pool, name)
	return -1
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// FGD's measure by hand: a workload of half 1g.5gb, half whole GPUs.
func TestMeasureByHand(t *testing.T) {
	objs, p := loadA100(t)
	w := workload(claim("a", "1g.5gb", 1), claim("b", "full", 1))
	m, err := w.Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	s := model.NewState(p)
	if f, free := m.Frag(s); f != 0 || free != 4 {
		t.Fatalf("empty cluster: frag %v free %v, want 0 and 4 GPUs", f, free)
	}
	pool := p.Devices[0].ID.Pool
	s.Take(device(t, p, pool, "gpu-0-mig-1g5gb-19-0"), true)
	// GPU 0 has 7/8 free and cannot take a whole-GPU task: for that half of
	// the workload its 7/8 are fragments.
	if f, free := m.Frag(s); !near(f, 0.5*7.0/8) || !near(free, 3+7.0/8) {
		t.Fatalf("one 1g.5gb: frag %v free %v, want %v and %v", f, free, 0.5*7.0/8, 3+7.0/8)
	}
}

// A shape of two whole GPUs needs two GPUs of one node: when one GPU of a
// node is touched, every free share of the node is a fragment for it.
func TestMeasureMultiGPU(t *testing.T) {
	objs, p := loadA100(t)
	m, err := workload(claim("a", "full", 2)).Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	s := model.NewState(p)
	pool := p.Devices[0].ID.Pool
	s.Take(device(t, p, pool, "gpu-0-mig-1g5gb-19-0"), true)
	if f, _ := m.Frag(s); !near(f, 1+7.0/8) {
		t.Fatalf("frag %v, want %v (all of the node's free share)", f, 1+7.0/8)
	}
}

// FGD packs a small task onto the GPU already in use when whole-GPU tasks
// are part of the workload; best-fit does too; both leave three GPUs whole.
func TestPlacePacks(t *testing.T) {
	objs, p := loadA100(t, claim("x", "1g.5gb", 1))
	m, err := workload(claim("a", "1g.5gb", 1), claim("b", "full", 1)).Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	pool := p.Devices[0].ID.Pool
	for _, rule := range []Rule{FGD, BestFit} {
		s := model.NewState(p)
		first := device(t, p, pool, "gpu-1-mig-3g20gb-9-4") // GPU 1 of the first node in use
		s.Take(first, true)
		a, ok := m.Place(s, p.Claims[0], rule)
		if !ok {
			t.Fatalf("rule %d: not placed", rule)
		}
		set := p.Devices[a.Picks[0].Dev].Consumes[0].Set
		if set != p.Devices[first].Consumes[0].Set {
			t.Fatalf("rule %d: placed on %s, want the GPU in use", rule, p.Devices[a.Picks[0].Dev].ID)
		}
	}
}

// The frag policy admits what binpack admits, every allocation valid, and
// leaves the cluster no more fragmented.
func TestRefineKeepsClaims(t *testing.T) {
	var cs []*resourceapi.ResourceClaim
	profiles := []string{"1g.5gb", "2g.10gb", "1g.5gb", "3g.20gb", "1g.10gb", "1g.5gb", "full"}
	for i, pr := range profiles {
		cs = append(cs, claim(string(rune('a'+i)), pr, 1))
	}
	objs, p := loadA100(t, cs...)
	w := workload(claim("s1", "1g.5gb", 1), claim("s2", "full", 1), claim("s3", "full", 1), claim("s4", "3g.20gb", 1))
	m, err := w.Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base, err := alloc.Run(ctx, p, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 5 * time.Second, Policy: alloc.Frag, Lookahead: m})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Assignments) != len(base.Assignments) || !res.Stats.Optimal {
		t.Fatalf("frag admits %d (optimal %v), binpack %d", len(res.Assignments), res.Stats.Optimal, len(base.Assignments))
	}
	fragOf := func(r *alloc.Result) float64 {
		s := model.NewState(p)
		for _, a := range r.Assignments {
			for _, pk := range a.Picks {
				s.Take(pk.Dev, true)
			}
		}
		f, _ := m.Frag(s)
		return f
	}
	if fragOf(res) > fragOf(base)+1e-9 {
		t.Fatalf("frag policy leaves %v fragmented, binpack %v", fragOf(res), fragOf(base))
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	var allocated []*resourceapi.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation != nil {
			allocated = append(allocated, c)
		}
	}
	if err := check.Check(objs, allocated, check.Options{}); err != nil {
		t.Fatal(err)
	}
}

// Coverage: with a workload of 1g.5gb tasks only, FGD's measure is the
// same whether two of them share a node or not; the whole-node shape that
// coverage adds makes the look-ahead put them on one node and keep the
// other whole for a large task to come.
func TestRefineKeepsANodeWhole(t *testing.T) {
	objs, p := loadA100(t, claim("x", "1g.5gb", 1), claim("y", "1g.5gb", 1))
	m, err := workload(claim("s", "1g.5gb", 1)).Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	m.Cover = true
	// The starting placement: one claim on each node.
	res := &alloc.Result{Rejected: map[int]error{}}
	for i, pool := range []string{"node-1", "node-2"} {
		d := device(t, p, pool, "gpu-0-mig-1g5gb-19-0")
		res.Assignments = append(res.Assignments, &alloc.Assignment{Claim: p.Claims[i], Node: p.Devices[d].Reach[0], Picks: []alloc.Pick{{Req: 0, Alt: 0, Dev: d}}})
	}
	s := model.NewState(p)
	for _, a := range res.Assignments {
		take(s, a)
	}
	before, _ := m.Frag(s)
	out := m.Refine(context.Background(), p, res, time.Time{})
	nodes := map[int]bool{}
	s = model.NewState(p)
	for _, a := range out.Assignments {
		nodes[p.Devices[a.Picks[0].Dev].Reach[0]] = true
		take(s, a)
	}
	if len(out.Assignments) != 2 || len(nodes) != 1 {
		t.Fatalf("refined placement uses %d nodes for %d claims, want both claims on one node", len(nodes), len(out.Assignments))
	}
	if after, _ := m.Frag(s); after > before+1e-9 {
		t.Fatalf("fragmentation %v after, %v before", after, before)
	}
}

// Upgrade: three claims of two whole GPUs (one node each) and a 1g.5gb;
// two nodes of two GPUs admit two of them whichever they are. Starting
// from the 1g.5gb on node-1 and a large claim on node-2, Refine with
// Upgrade trades the 1g.5gb for a second large claim (two claims still,
// the cluster full); without it the placement keeps the 1g.5gb.
func TestRefineUpgradeTradesForALargerClaim(t *testing.T) {
	objs, p := loadA100(t, claim("small", "1g.5gb", 1), claim("big1", "full", 2), claim("big2", "full", 2), claim("big3", "full", 2))
	start := func() *alloc.Result {
		res := &alloc.Result{Rejected: map[int]error{2: errors.New("x"), 3: errors.New("x")}}
		d := device(t, p, "node-1", "gpu-0-mig-1g5gb-19-0")
		res.Assignments = append(res.Assignments, &alloc.Assignment{Claim: p.Claims[0], Node: p.Devices[d].Reach[0], Picks: []alloc.Pick{{Req: 0, Alt: 0, Dev: d}}})
		g0, g1 := device(t, p, "node-2", "gpu-0"), device(t, p, "node-2", "gpu-1")
		res.Assignments = append(res.Assignments, &alloc.Assignment{Claim: p.Claims[1], Node: p.Devices[g0].Reach[0], Picks: []alloc.Pick{{Req: 0, Alt: 0, Dev: g0}, {Req: 0, Alt: 0, Dev: g1}}})
		res.Stats.Objective, res.Stats.Admitted = 2, 2
		return res
	}
	admitted := func(r *alloc.Result) map[string]bool {
		out := map[string]bool{}
		for _, a := range r.Assignments {
			out[a.Claim.Obj.Name] = true
		}
		return out
	}
	for _, up := range []bool{false, true} {
		m, err := workload(claim("s", "1g.5gb", 1), claim("b", "full", 2)).Bind(context.Background(), objs, p)
		if err != nil {
			t.Fatal(err)
		}
		m.Upgrade = up
		out := m.Refine(context.Background(), p, start(), time.Time{})
		got := admitted(out)
		if len(out.Assignments) != 2 || out.Stats.Objective != 2 || out.Stats.Admitted != 2 {
			t.Fatalf("upgrade %v: %d claims admitted (objective %d), want 2", up, len(out.Assignments), out.Stats.Objective)
		}
		if got["small"] == up {
			t.Fatalf("upgrade %v: admitted %v", up, got)
		}
		if up {
			if _, ok := out.Rejected[0]; !ok {
				t.Fatalf("the traded claim has no reason: %v", out.Rejected)
			}
			if len(out.Rejected) != 2 {
				t.Fatalf("rejected %v, want the small claim and one large", out.Rejected)
			}
		}
		var allocated []*resourceapi.ResourceClaim
		claims, err := alloc.Allocated(p, out)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range claims {
			if c.Status.Allocation != nil {
				allocated = append(allocated, c)
			}
		}
		if err := check.Check(objs, allocated, check.Options{}); err != nil {
			t.Fatal(err)
		}
	}
}
