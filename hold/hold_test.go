package hold

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

const driver = "gpu.example.com"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cluster: one node with n whole GPUs.
func cluster(n int) *input.Objects {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus"},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To("n1"),
			Pool: resourceapi.ResourcePool{Name: "n1", Generation: 1, ResourceSliceCount: 1}},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return &input.Objects{
		Slices: []*resourceapi.ResourceSlice{s},
		Classes: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}},
		Nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}}}},
	}
}

// claim asks for gpus whole GPUs.
func claim(name string, gpus int) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID(name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: int64(gpus)}}}}},
	}
}

// build makes the problem of pending claims on objs, with h's prototypes.
func build(t *testing.T, objs *input.Objects, h *Holder, pending ...*resourceapi.ResourceClaim) (*model.Problem, []string) {
	t.Helper()
	o := *objs
	o.Claims = append(slices.Clone(objs.Claims), pending...)
	o.Claims = append(o.Claims, h.Prototypes()...)
	p, err := model.Build(context.Background(), &o, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(p.Claims))
	for i, c := range p.Claims {
		if !IsPrototype(c.Obj) {
			keys[i] = c.Obj.Name
		}
	}
	return p, keys
}

// history observes n one-GPU claims arriving over the last 20 s.
func history(h *Holder, n int, now time.Time) {
	for i := range n {
		h.Observe(now.Add(-20*time.Second+time.Duration(i)*20*time.Second/time.Duration(n)), fmt.Sprintf("old-%d", i), claim(fmt.Sprintf("old-%d", i), 1))
	}
}

func names(p *model.Problem, idx []int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, p.Claims[i].Obj.Name)
	}
	return out
}

func TestNothingForecastAdmitsAll(t *testing.T) {
	// A claim alone on an idle cluster, with no demand seen before: no
	// scenario is solved and the claim is admitted at once, even one that
	// takes the whole node.
	h := New(Options{})
	now := t0
	big := claim("big", 4)
	h.Observe(now, "big", big)
	p, keys := build(t, cluster(4), h, big)
	d, err := h.Decide(context.Background(), p, keys, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Held) != 0 || d.Scenarios != 0 || len(d.Problem.Claims) != 1 || d.Problem.Claims[0].Obj.Name != "big" {
		t.Fatalf("held %v, %d scenarios, problem %d claims; want big admitted without scenarios", names(p, d.Held), d.Scenarios, len(d.Problem.Claims))
	}
}

// bigAmongSmall: after the history of 60 one-GPU claims in 20 s, a claim
// for half of an idle 8-GPU node and a one-GPU claim arrive at now; the
// Holder's decision at now (scenario solves within a second in all).
func bigAmongSmall(t *testing.T, opts Options, now time.Time) (*Holder, *model.Problem, *Decision) {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	h := New(opts)
	history(h, 60, now)
	big, small := claim("big", 4), claim("small", 1)
	h.Observe(now, "big", big)
	h.Observe(now, "small", small)
	p, keys := build(t, cluster(8), h, big, small)
	d, err := h.Decide(context.Background(), p, keys, now)
	if err != nil {
		t.Fatal(err)
	}
	return h, p, d
}

func TestHoldsLargeClaimForForecastSmallOnes(t *testing.T) {
	// Small claims keep arriving (60 in 20 s: 1/s over the 60 s lookback,
	// 30 forecast in the 30 s horizon). A claim for half the node would
	// take the room of four of them: every scenario admits small ones
	// instead, so it is held; the small claim pending with it is admitted.
	// Holding gains 3 claims (8 admitted instead of big, small and 3
	// forecast ones) for 4 devices idle until the 4 claims that take their
	// room have come (4 s at 62 arrivals a minute), on average half of
	// that: 7.7 device-s (idle4), which the default 600 s per claim pays for.
	now := t0
	_, p, d := bigAmongSmall(t, Options{Seed: 1}, now)
	if got := names(p, d.Held); !slices.Equal(got, []string{"big"}) {
		t.Fatalf("held %v, want [big]", got)
	}
	if got := names(p, d.Kept); !slices.Equal(got, []string{"small"}) {
		t.Fatalf("kept %v, want [small]", got)
	}
	if d.Scenarios != 5 || d.Expected < 25 || d.Expected > 35 {
		t.Fatalf("%d scenarios, %.1f forecast; want 5 and about 30", d.Scenarios, d.Expected)
	}
	if d.Gain != 3 || math.Abs(d.Idle-idle4) > 1e-9 || d.Declined != 0 {
		t.Fatalf("gain %v, idle %v device-s, declined %d; want 3, %v, 0", d.Gain, d.Idle, d.Declined, idle4)
	}
	// The held claim is due again when demand counts as stopped if nothing
	// more arrives (MinQuiet, 3 s: the history's longest gap is 1/3 s),
	// before Recheck (10 s) and before its hold ends.
	if want := now.Add(3 * time.Second); !d.Recheck.Equal(want) {
		t.Fatalf("recheck %v, want %v", d.Recheck, want)
	}
	// Solving the decision's problem admits the kept claim only; the held
	// one is neither admitted nor rejected.
	out, err := alloc.Run(context.Background(), d.Problem, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.Drop(out)
	if len(out.Assignments) != 1 || out.Assignments[0].Claim.Obj.Name != "small" || len(out.Rejected) != 0 || len(out.Unplaceable) != 0 {
		t.Fatalf("after Drop: %d assignments, rejected %v, unplaceable %v; want small admitted only", len(out.Assignments), out.Rejected, out.Unplaceable)
	}
	claims, err := alloc.Allocated(d.Problem, out)
	if err != nil {
		t.Fatal(err)
	}
	objs := cluster(8)
	objs.Claims = []*resourceapi.ResourceClaim{claim("small", 1)}
	if err := check.Check(objs, []*resourceapi.ResourceClaim{claims[0]}, check.Options{}); err != nil {
		t.Fatalf("kept claim's allocation: %v", err)
	}
}

func TestHoldIsBounded(t *testing.T) {
	// The same large claim, first seen MaxHold ago: it is no longer held,
	// whatever the forecast says.
	h := New(Options{Seed: 1, MaxHold: 30 * time.Second})
	now := t0
	history(h, 60, now)
	big := claim("big", 4)
	h.Observe(now.Add(-30*time.Second), "big", big)
	p, keys := build(t, cluster(4), h, big)
	d, err := h.Decide(context.Background(), p, keys, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Held) != 0 || len(d.Kept) != 1 {
		t.Fatalf("held %v after MaxHold; want it admitted", names(p, d.Held))
	}
	// A second earlier it is still held.
	d, err = h.Decide(context.Background(), p, keys, now.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Held) != 1 {
		t.Fatalf("held %v within MaxHold; want [big]", names(p, d.Held))
	}
	if want := now; !d.Recheck.Equal(want) {
		t.Fatalf("recheck %v, want the end of its hold %v", d.Recheck, want)
	}
}

func TestForecastFitsAdmitsAll(t *testing.T) {
	// Room for everything forecast: nothing is held.
	h := New(Options{Seed: 1})
	now := t0
	history(h, 6, now) // 0.1/s: 3 forecast in 30 s
	big := claim("big", 4)
	h.Observe(now, "big", big)
	p, keys := build(t, cluster(16), h, big)
	d, err := h.Decide(context.Background(), p, keys, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Held) != 0 || d.Scenarios == 0 {
		t.Fatalf("held %v with %d scenarios; want nothing held, scenarios solved", names(p, d.Held), d.Scenarios)
	}
}

func TestKeptOutweighHeld(t *testing.T) {
	// One node of 4 GPUs. The kept claims outweigh the held ones, so
	// solving the decision's problem admits the most kept claims even
	// where admitting held ones instead would admit more claims (k2 and
	// the three held ones would be four).
	objs := cluster(4)
	h := New(Options{})
	p, _ := build(t, objs, h, claim("k1", 3), claim("k2", 2), claim("h1", 1), claim("h2", 1), claim("h3", 1))
	d := &Decision{Kept: []int{0, 1}, Held: []int{2, 3, 4}}
	d.Problem = subProblem(p, p.Claims)
	for _, c := range d.Problem.Claims[:2] {
		c.Weight *= 4
	}
	out, err := alloc.Run(context.Background(), d.Problem, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.Drop(out)
	// k1 (3) and k2 (2) do not fit together on 4 GPUs: one kept claim is
	// admitted, and the held claims only fill what is left.
	if out.Stats.Admitted != 1 || !d.IsHeld(2) || d.IsHeld(1) {
		t.Fatalf("admitted %d, want 1 kept claim", out.Stats.Admitted)
	}
	for _, a := range out.Assignments {
		if d.IsHeld(a.Claim.Index) {
			t.Fatalf("held claim %s admitted", a.Claim.Obj.Name)
		}
	}
	if _, ok := out.Rejected[1]; !ok {
		if _, ok := out.Rejected[0]; !ok {
			t.Fatalf("the kept claim that did not fit is not rejected: %v", out.Rejected)
		}
	}
}

func TestDeterministic(t *testing.T) {
	run := func() []int {
		h := New(Options{Seed: 7})
		now := t0
		history(h, 40, now)
		var pending []*resourceapi.ResourceClaim
		for i := range 6 {
			c := claim(fmt.Sprintf("c%d", i), 1+i%3)
			h.Observe(now, c.Name, c)
			pending = append(pending, c)
		}
		p, keys := build(t, cluster(8), h, pending...)
		d, err := h.Decide(context.Background(), p, keys, now)
		if err != nil {
			t.Fatal(err)
		}
		return d.Held
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatalf("held %v then %v with the same seed and input", a, b)
	}
}

func TestRateAndForget(t *testing.T) {
	// MinQuiet past the lookback: demand never counts as stopped here.
	h := New(Options{Lookback: 10 * time.Second, MaxHold: 20 * time.Second, MinQuiet: time.Minute})
	for i := range 5 {
		h.Observe(t0.Add(time.Duration(i)*time.Second), fmt.Sprint(i), claim(fmt.Sprint(i), 1))
	}
	h.Observe(t0, "0", claim("0", 1)) // seen before: not an arrival
	if r := h.Rate(t0.Add(5 * time.Second)); r != 0.5 {
		t.Fatalf("rate %v, want 5 arrivals / 10 s", r)
	}
	if e := h.Expected(t0.Add(12 * time.Second)); e != 2*0.1*20 {
		t.Fatalf("expected %v, want 2 arrivals in the lookback x 20 s horizon / 10 s", e)
	}
	// Measured over the time arrivals were seen (4 s), not below MinSpan.
	short := New(Options{Lookback: 10 * time.Second, MinSpan: 2 * time.Second})
	for i := range 5 {
		short.Observe(t0.Add(time.Duration(i)*time.Second), fmt.Sprint(i), claim(fmt.Sprint(i), 1))
	}
	if r := short.Rate(t0.Add(4 * time.Second)); r != 5.0/4 {
		t.Fatalf("rate %v with MinSpan, want 5 arrivals / 4 s", r)
	}
	one := New(Options{Lookback: 10 * time.Second, MinSpan: 2 * time.Second})
	one.Observe(t0, "0", claim("0", 1))
	if r := one.Rate(t0.Add(time.Second / 2)); r != 1.0/2 {
		t.Fatalf("rate %v just after the first arrival, want 1 / MinSpan", r)
	}
	h.Forget(func(k string) bool { return k == "3" })
	if !h.Since("0").IsZero() || !h.Since("3").Equal(t0.Add(3*time.Second)) {
		t.Fatalf("Forget kept %v, dropped %v", h.Since("0"), h.Since("3"))
	}
}

func TestPoissonMean(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, lambda := range []float64{0.5, 8, 200} {
		sum := 0
		const n = 4000
		for range n {
			sum += poisson(r, lambda)
		}
		if m := float64(sum) / n; m < 0.95*lambda || m > 1.05*lambda {
			t.Fatalf("Poisson(%v) mean %v", lambda, m)
		}
	}
}

func TestExpiredClaimDoesNotOutrankHeldOnes(t *testing.T) {
	// On a node of four GPUs, with one-GPU claims forecast: a claim for
	// the whole node whose hold has ended, and two two-GPU claims the
	// scenarios hold (the forecast one-GPU claims would use the room
	// better). The large claim is decided now, but at its own weight, so
	// the solve prefers the two held ones (an offline solve would) and the
	// large one is not admitted; the held ones stay pending. Before, its
	// weight was raised above the held ones' and it took the node.
	h := New(Options{Seed: 1, MaxHold: 30 * time.Second})
	now := t0
	history(h, 60, now)
	big := claim("big", 4)
	h.Observe(now.Add(-30*time.Second), "big", big)
	pending := []*resourceapi.ResourceClaim{big}
	for i := range 2 {
		c := claim(fmt.Sprintf("medium-%d", i), 2)
		h.Observe(now, c.Name, c)
		pending = append(pending, c)
	}
	p, keys := build(t, cluster(4), h, pending...)
	d, err := h.Decide(context.Background(), p, keys, now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names(p, d.Kept), "big") || slices.Contains(names(p, d.Held), "big") {
		t.Fatalf("kept %v, held %v: the expired claim must be decided now", names(p, d.Kept), names(p, d.Held))
	}
	if len(d.Held) != 2 {
		t.Fatalf("held %v, want both two-GPU claims", names(p, d.Held))
	}
	for i, c := range d.Problem.Claims {
		if c.Obj.Name == "big" && c.Weight != 1 {
			t.Fatalf("the expired claim has weight %d in the solve, want its own (1); position %d", c.Weight, i)
		}
	}
	out, err := alloc.Run(context.Background(), d.Problem, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.Drop(out)
	for _, a := range out.Assignments {
		if a.Claim.Obj.Name == "big" {
			t.Fatalf("the expired claim took the node from %d held claims", len(d.Held))
		}
	}
}

func TestClaimThatFitsNowhereIsNotHeld(t *testing.T) {
	// A claim for more GPUs than the node has, with one for half the node
	// that holding gains from: no scenario admits either, so Decide holds
	// both, but the solve finds the first fits nowhere even alone, and
	// Drop leaves it rejected (reported unallocatable, not silently held).
	h := New(Options{Seed: 1, Timeout: time.Second})
	now := t0
	history(h, 60, now)
	huge, big := claim("huge", 16), claim("big", 4)
	h.Observe(now, "huge", huge)
	h.Observe(now, "big", big)
	p, keys := build(t, cluster(8), h, huge, big)
	d, err := h.Decide(context.Background(), p, keys, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Held) != 2 {
		t.Fatalf("held %v, want [huge big] before the solve", names(p, d.Held))
	}
	out, err := alloc.Run(context.Background(), d.Problem, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.Drop(out)
	hi := slices.IndexFunc(d.Problem.Claims, func(c *model.Claim) bool { return c.Obj.Name == "huge" })
	if d.IsHeld(hi) || !slices.Equal(out.Unplaceable, []int{hi}) || out.Rejected[hi] == nil {
		t.Fatalf("held %v, unplaceable %v, rejected %v: want huge rejected as unplaceable", d.IsHeld(hi), out.Unplaceable, out.Rejected)
	}
	// Alone, it is not held at all: holding it gains nothing (no solve
	// admits it), so the scenarios' hold is declined.
	h = New(Options{Seed: 1, Timeout: time.Second})
	history(h, 60, now)
	h.Observe(now, "huge", huge)
	p, keys = build(t, cluster(8), h, huge)
	if d, err = h.Decide(context.Background(), p, keys, now); err != nil {
		t.Fatal(err)
	}
	if len(d.Held) != 0 || d.Declined != 1 || d.Gain != 0 {
		t.Fatalf("alone: held %v, declined %d, gain %v; want none held, 1 declined, no gain", names(p, d.Held), d.Declined, d.Gain)
	}
}

// idle4 is bigAmongSmall's expected idle device-seconds: 4 devices for half
// of the time the 4 claims that take their room need to arrive (62 in the
// last minute).
const idle4 = 4 * (4 / (62.0 / 60)) / 2

// Holding only pays where the forecast gains claims: at 1 s of idle
// device per claim gained, the 3 claims bigAmongSmall's hold gains do not
// pay for its 7.7 idle device-seconds, so nothing is held and both claims
// are admitted now.
func TestHoldOnlyWhatTheGainPays(t *testing.T) {
	_, p, d := bigAmongSmall(t, Options{Seed: 1, IdlePerClaim: time.Second}, t0)
	if len(d.Held) != 0 || d.Declined != 1 || d.Gain != 3 || math.Abs(d.Idle-idle4) > 1e-9 {
		t.Fatalf("held %v, declined %d, gain %v, idle %v; want nothing held, 1 declined, gain 3, idle %v", names(p, d.Held), d.Declined, d.Gain, d.Idle, idle4)
	}
	if !d.Recheck.IsZero() {
		t.Fatalf("recheck %v with nothing held", d.Recheck)
	}
	out, err := alloc.Run(context.Background(), d.Problem, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.Drop(out)
	if out.Stats.Admitted != 2 {
		t.Fatalf("admitted %d, want big and small", out.Stats.Admitted)
	}
	// At 3 s per claim it pays (9 >= 7.7; 2 s: 6 does not).
	_, p, d = bigAmongSmall(t, Options{Seed: 1, IdlePerClaim: 3 * time.Second}, t0)
	if got := names(p, d.Held); !slices.Equal(got, []string{"big"}) {
		t.Fatalf("at 3 s per claim: held %v, want [big]", got)
	}
}

// No gain, no hold: on a node of four GPUs, the claim for all of it and a
// one-GPU claim cannot both run, so admitting every current claim first
// (without holding) admits the small one and as many forecast ones as
// the scenarios' optimum. Holding the large claim would gain nothing; it
// is decided now (and rejected: no room), not held for up to MaxHold.
func TestNoGainNoHold(t *testing.T) {
	h := New(Options{Seed: 1, Timeout: time.Second})
	now := t0
	history(h, 60, now)
	big, small := claim("big", 4), claim("small", 1)
	h.Observe(now, "big", big)
	h.Observe(now, "small", small)
	p, keys := build(t, cluster(4), h, big, small)
	d, err := h.Decide(context.Background(), p, keys, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Held) != 0 || d.Declined != 1 || d.Gain != 0 {
		t.Fatalf("held %v, declined %d, gain %v; want nothing held", names(p, d.Held), d.Declined, d.Gain)
	}
	out, err := alloc.Run(context.Background(), d.Problem, alloc.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.Drop(out)
	if len(out.Assignments) != 1 || out.Assignments[0].Claim.Obj.Name != "small" || len(out.Rejected) != 1 {
		t.Fatalf("%d admitted, rejected %v; want small admitted, big rejected", len(out.Assignments), out.Rejected)
	}
}

func TestQuietAt(t *testing.T) {
	h := New(Options{Lookback: time.Minute})
	if _, ok := h.QuietAt(t0); ok {
		t.Fatal("quiet time without arrivals")
	}
	// Four arrivals, the longest gap 4 s: quiet 1.5 x 4 s after the last.
	for i, at := range []time.Duration{0, time.Second, 5 * time.Second, 6 * time.Second} {
		h.Observe(t0.Add(at), fmt.Sprint(i), claim(fmt.Sprint(i), 1))
	}
	if q, ok := h.QuietAt(t0.Add(7 * time.Second)); !ok || !q.Equal(t0.Add(12*time.Second)) {
		t.Fatalf("quiet at %v (%v), want 12 s", q, ok)
	}
	if h.Expected(t0.Add(11*time.Second)) == 0 || h.Expected(t0.Add(12*time.Second)) != 0 {
		t.Fatalf("forecast %v at 11 s, %v at 12 s; want some, then none", h.Expected(t0.Add(11*time.Second)), h.Expected(t0.Add(12*time.Second)))
	}
	// Arrivals close together: MinQuiet.
	b := New(Options{})
	for i := range 10 {
		b.Observe(t0, fmt.Sprint(i), claim(fmt.Sprint(i), 1))
	}
	if q, _ := b.QuietAt(t0); !q.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("burst quiet at %v, want MinQuiet (3 s) after it", q)
	}
}

// A burst: small claims and a large one arrive together and nothing
// follows. While the burst may go on, the large claim is held for the
// forecast; once no claim arrived for MinQuiet, nothing is forecast and it
// is admitted, in the pass the decision asked for (Recheck).
func TestBurstOverDecidesHeldClaims(t *testing.T) {
	now := t0
	h, p, d := bigAmongSmall(t, Options{Seed: 1, MaxHold: 200 * time.Second}, now)
	if got := names(p, d.Held); !slices.Equal(got, []string{"big"}) {
		t.Fatalf("held %v during the burst, want [big]", got)
	}
	if n := d.HeldDevices(p); n != 4 {
		t.Fatalf("held devices %d, want the big claim's 4", n)
	}
	if want := now.Add(3 * time.Second); !d.Recheck.Equal(want) {
		t.Fatalf("recheck %v, want %v (quiet)", d.Recheck, want)
	}
	// The pass at Recheck: the small claim is running, the big one pending.
	p, keys := build(t, cluster(8), h, claim("big", 4))
	d, err := h.Decide(context.Background(), p, keys, d.Recheck)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Held) != 0 || d.Expected != 0 || len(d.Kept) != 1 {
		t.Fatalf("after the burst: held %v, forecast %v; want big kept, nothing forecast", names(p, d.Held), d.Expected)
	}
}

// Waves: the gap between waves is learnt, so a claim held after a wave
// stays held across the next gap instead of being decided as soon as the
// wave ends.
func TestWavesKeepHoldingAcrossTheGap(t *testing.T) {
	h := New(Options{Seed: 1, MaxHold: 200 * time.Second, Lookback: 2 * time.Minute})
	for w := range 3 {
		for i := range 20 {
			k := fmt.Sprintf("w%d-%d", w, i)
			h.Observe(t0.Add(time.Duration(w)*30*time.Second), k, claim(k, 1))
		}
	}
	last := t0.Add(60 * time.Second)
	q, ok := h.QuietAt(last)
	if !ok || !q.Equal(last.Add(45*time.Second)) {
		t.Fatalf("quiet at %v, want 1.5 x the 30 s gap after the last wave", q.Sub(last))
	}
	if h.Expected(last.Add(31*time.Second)) == 0 {
		t.Fatal("nothing forecast 31 s after a wave, with waves 30 s apart")
	}
}

// Once arrivals pause (no claim for PauseAfter, 10 s), a hold must pay at
// PauseIdlePerClaim: bigAmongSmall's hold (gain 3 claims for 7.7 idle
// device-seconds) pays at 3 s per claim while claims arrive, and the pass
// asks to run again when the pause begins (before its recheck, 30 s, and
// before demand counts as stopped, held off to 33 s by a large
// QuietFactor); decided again 12 s after the last arrival, it does not pay
// at 2 s per claim, and nothing is held.
func TestPausedHoldsPayMore(t *testing.T) {
	now := t0
	opts := Options{Seed: 1, IdlePerClaim: 3 * time.Second, PauseIdlePerClaim: 2 * time.Second,
		QuietFactor: 100, MaxHold: 90 * time.Second, Horizon: 30 * time.Second}
	h, p, d := bigAmongSmall(t, opts, now)
	if got := names(p, d.Held); !slices.Equal(got, []string{"big"}) {
		t.Fatalf("while claims arrive: held %v, want [big]", got)
	}
	if want := now.Add(10 * time.Second); !d.Recheck.Equal(want) {
		t.Fatalf("recheck %v, want the pause's start %v", d.Recheck, want)
	}
	keys := make([]string, len(p.Claims))
	for i, c := range p.Claims {
		if !IsPrototype(c.Obj) {
			keys[i] = c.Obj.Name
		}
	}
	later := now.Add(12 * time.Second)
	d, err := h.Decide(context.Background(), p, keys, later)
	if err != nil {
		t.Fatal(err)
	}
	if d.Expected < 1 {
		t.Fatalf("forecast %.1f at %v: demand must not count as stopped yet", d.Expected, later)
	}
	if len(d.Held) != 0 || d.Declined != 1 || d.Gain*2 >= d.Idle {
		t.Fatalf("in the pause: held %v, declined %d, gain %v, idle %v; want nothing held, 1 declined", names(p, d.Held), d.Declined, d.Gain, d.Idle)
	}
}
