package k8s

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/model"
)

// template is a ResourceClaimTemplate asking for count GPUs.
func template(name string, count int64) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: claim("x", count, nil).Spec},
	}
}

// templatePod is a gated pod whose one claim comes from template tmpl.
func templatePod(name, tmpl string) *corev1.Pod {
	p := gatedPod(name)
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl)}}
	return p
}

// materialize does what the resourceclaim controller does for a template
// pod: creates its claim and names it in the pod's status.
func (e *env) materialize(t *testing.T, podName string, count int64) {
	t.Helper()
	ctx := context.Background()
	c := claim(podName+"-gpu-abcde", count, nil)
	if _, err := e.client.ResourceV1().ResourceClaims("default").Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := e.pod(t, podName)
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(c.Name)}}
	if _, err := e.client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pod's status and the claim come through two informers: wait for
	// both (a pass that saw the status without the claim saw neither the
	// stand-in nor the claim; seen once in CI).
	e.waitCache(t, "the claim of "+podName, func(s *Snapshot) bool {
		if !slices.ContainsFunc(s.Claims, func(q *resourceapi.ResourceClaim) bool { return q.Name == c.Name }) {
			return false
		}
		for _, q := range s.Pods {
			if q.Name == podName {
				_, complete := podClaimNames(q)
				return complete
			}
		}
		return false
	})
}

// Two GPUs. Pod big's claim (two GPUs) exists; pods s1 and s2 (one GPU
// each) have none yet. Solving only what exists would give big both GPUs;
// with the stand-ins the optimum admits s1 and s2 and leaves big pending.
// When s1's claim appears, the plan allocates it without another solve.
func TestStandInsKeepDevicesForClaimsNotCreatedYet(t *testing.T) {
	e := newEnv(t, Options{}, node("n1"), slice("n1", 2), class(), template("one", 1), template("two", 2),
		templatePod("big", "two"), templatePod("s1", "one"), templatePod("s2", "one"))
	e.materialize(t, "big", 2)
	res := e.pass(t)
	if res.Projected != 2 || res.Allocated != 0 || res.Unallocated != 1 {
		t.Fatalf("first pass %+v: want 2 stand-ins, nothing written, big unallocated", res)
	}
	if e.claim(t, "big-gpu-abcde").Status.Allocation != nil {
		t.Fatal("big was allocated: the devices the two small pods need are gone")
	}
	solves := histogramCount(t, e.r.Metrics.SolveSeconds)

	e.materialize(t, "s1", 1)
	res = e.pass(t)
	if res.Planned != 1 || res.Allocated != 1 || res.Ungated != 1 {
		t.Fatalf("second pass %+v: want s1's claim written from the plan and its pod ungated", res)
	}
	if n := histogramCount(t, e.r.Metrics.SolveSeconds); n != solves {
		t.Errorf("the plan held, yet the pass solved again (%d solves, was %d)", n, solves)
	}
	e.materialize(t, "s2", 1)
	if res = e.pass(t); res.Planned != 1 || res.Allocated != 1 {
		t.Fatalf("third pass %+v: want s2's claim written from the plan", res)
	}
	if e.claim(t, "big-gpu-abcde").Status.Allocation != nil {
		t.Error("big allocated although both GPUs are taken")
	}
	e.allFeasible(t)
}

// A pod that goes away while its stand-in is planned frees what the plan
// kept for it: the next pass solves again and gives it to the pending claim.
func TestPlanDroppedWhenPlannedDemandLeaves(t *testing.T) {
	e := newEnv(t, Options{}, node("n1"), slice("n1", 2), class(), template("one", 1), template("two", 2),
		templatePod("big", "two"), templatePod("s1", "one"), templatePod("s2", "one"))
	e.materialize(t, "big", 2)
	if res := e.pass(t); res.Allocated != 0 || res.Projected != 2 {
		t.Fatalf("first pass %+v", res)
	}
	for _, n := range []string{"s1", "s2"} {
		if err := e.client.CoreV1().Pods("default").Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.waitCache(t, "the small pods gone", func(s *Snapshot) bool { return len(s.Pods) == 1 })
	if res := e.pass(t); res.Allocated != 1 || res.Planned != 0 {
		t.Fatalf("after the small pods left %+v: want big solved again and allocated", res)
	}
	e.allFeasible(t)
}

// A real claim and a stand-in of the same shape: whichever the solver
// admitted, the real one gets the allocation, since it can be written now;
// a stand-in of another shape keeps its own.
func TestPreferRealOverStandIn(t *testing.T) {
	si := standIn(templatePod("later", "one"), "gpu", template("one", 1))
	other := si.DeepCopy()
	other.UID, other.Spec = "projected:other", claim("x", 2, nil).Spec
	real := claim("now", 1, nil)
	claims := []*resourceapi.ResourceClaim{si, other, real}
	si.Status.Allocation, other.Status.Allocation = onN1(), onN1()
	p := &model.Problem{Claims: []*model.Claim{{FixedNode: -1}, {FixedNode: -1}, {FixedNode: -1}}}
	lost := errors.New("lost")
	rejected := map[int]error{2: lost}
	preferReal(p, claims, rejected)
	if real.Status.Allocation == nil || si.Status.Allocation != nil || rejected[0] != lost || len(rejected) != 1 {
		t.Fatalf("real %v, stand-in %v, rejected %v: want the real claim allocated and the stand-in rejected", real.Status.Allocation, si.Status.Allocation, rejected)
	}
	if other.Status.Allocation == nil {
		t.Error("a stand-in of another shape lost its allocation")
	}

	// Two stand-ins of one shape, one allocation: the older pod's gets it.
	older, younger := templatePod("b", "one"), templatePod("a", "one")
	older.CreationTimestamp = metav1.NewTime(time.Unix(1000, 0))
	younger.CreationTimestamp = metav1.NewTime(time.Unix(1001, 0))
	so, sy := standIn(older, "gpu", template("one", 1)), standIn(younger, "gpu", template("one", 1))
	sy.Status.Allocation = onN1()
	claims = []*resourceapi.ResourceClaim{sy, so}
	rejected = map[int]error{1: lost}
	preferReal(&model.Problem{Claims: []*model.Claim{{FixedNode: -1}, {FixedNode: -1}}}, claims, rejected)
	if so.Status.Allocation == nil || sy.Status.Allocation != nil || rejected[0] != lost {
		t.Errorf("older %v, younger %v: want the older pod's stand-in allocated", so.Status.Allocation, sy.Status.Allocation)
	}
}

func TestProjectDemand(t *testing.T) {
	withClaim := templatePod("a", "one")
	withClaim.UID = k8stypes.UID("pod-a")
	withClaim.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("a-gpu-x")}}
	real := claim("a-gpu-x", 1, nil)
	noTemplate := templatePod("b", "missing")
	waiting := templatePod("c", "one")
	s := &Snapshot{
		Pods:      []*corev1.Pod{withClaim, noTemplate, waiting, gatedPod("d", "not-created")},
		Claims:    []*resourceapi.ResourceClaim{real},
		Templates: []*resourceapi.ResourceClaimTemplate{template("one", 1)},
	}
	d := projectDemand(s, "")
	if len(d.projected) != 1 || d.projected[0].Name != "c:gpu" || !isProjected(d.projected[0]) {
		t.Fatalf("projected %v: want c's stand-in only", d.projected)
	}
	if d.unknown != 2 {
		t.Errorf("unknown = %d: want 2 (a missing template, a named claim not created)", d.unknown)
	}
	if d.key(real) != podDemandKey(withClaim, "gpu") {
		t.Errorf("a created template claim is keyed %q, want its pod's entry", d.key(real))
	}
	if isProjected(real) {
		t.Error("a real claim taken for a stand-in")
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// The second check before ungating is skipped only when nobody else
// allocated since the re-check: a foreign allocation must be seen.
func TestForeignAllocationSince(t *testing.T) {
	e := newEnv(t, Options{}, node("n1"), slice("n1", 2), class(), claim("mine", 1, nil))
	base := e.r.cachedAllocations()
	mine := e.claim(t, "mine")
	mine.Status.Allocation = onN1()
	if _, err := e.client.ResourceV1().ResourceClaims("default").UpdateStatus(context.Background(), mine, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitCache(t, "mine allocated", func(s *Snapshot) bool { return len(allocations(s)) == 1 })
	written := map[string]*resourceapi.ResourceClaim{"default/mine": mine}
	if e.r.foreignSince(base, written) {
		t.Error("this pass's own write taken for someone else's")
	}
	other := claim("other", 1, nil)
	other.Status.Allocation = onN1()
	e.create(t, other)
	e.waitCache(t, "other allocated", func(s *Snapshot) bool { return len(allocations(s)) == 2 })
	if !e.r.foreignSince(base, written) {
		t.Error("an allocation by someone else since the re-check not seen")
	}
}

// A gated pod whose claims are still missing past the cut-off is stale:
// it no longer holds the window open (unknown) nor gets stand-ins; a
// young one does, and a pod whose claims exist is never stale.
func TestProjectDemandStale(t *testing.T) {
	now := time.Now()
	aged := func(p *corev1.Pod, age time.Duration) *corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(now.Add(-age))
		return p
	}
	withClaim := aged(templatePod("a", "one"), time.Hour)
	withClaim.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("a-gpu-x")}}
	s := &Snapshot{
		Pods: []*corev1.Pod{withClaim, aged(templatePod("b", "missing"), time.Hour), aged(templatePod("c", "one"), time.Hour),
			aged(gatedPod("d", "not-created"), time.Hour), aged(templatePod("e", "missing"), time.Second), aged(templatePod("f", "one"), time.Second)},
		Claims:    []*resourceapi.ResourceClaim{claim("a-gpu-x", 1, nil)},
		Templates: []*resourceapi.ResourceClaimTemplate{template("one", 1)},
	}
	d := projectDemandAt(s, "", now.Add(-5*time.Minute))
	if len(d.projected) != 1 || d.projected[0].Name != "f:gpu" {
		t.Errorf("projected %v: want the young pod f's stand-in only", d.projected)
	}
	if d.unknown != 1 {
		t.Errorf("unknown = %d: want 1 (the young pod e without its template)", d.unknown)
	}
	var stale []string
	for _, sp := range d.stale {
		stale = append(stale, sp.pod.Name+": "+sp.why)
	}
	want := []string{"b: template missing", "c: the claim of entry gpu (not created from its template yet)", "d: claim not-created"}
	if strings.Join(stale, "; ") != strings.Join(want, "; ") {
		t.Errorf("stale %q, want %q", stale, want)
	}
}

// A pod the scheduler binds since the re-check is this pass's own, not
// someone else's, only when every claim it uses was written by this pass
// on the node it was bound to; a pod bound elsewhere, or using a claim this
// pass did not write, takes node resources the re-check did not place.
func TestOwnBindNotForeign(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{}, node("n1"), node("n2"), slice("n1", 2), class(), claim("mine", 1, nil), claim("theirs", 1, nil),
		gatedPod("own", "mine"), gatedPod("elsewhere", "mine"), gatedPod("other", "theirs"))
	base := e.r.cachedAllocations()
	mine := e.claim(t, "mine")
	mine.Status.Allocation = onN1()
	written := map[string]*resourceapi.ResourceClaim{"default/mine": mine}
	bind := func(pod, node string) {
		t.Helper()
		p := e.pod(t, pod)
		p.Spec.SchedulingGates, p.Spec.NodeName = nil, node
		if _, err := e.client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitCache(t, pod+" bound", func(s *Snapshot) bool {
			for _, q := range s.Pods {
				if q.Name == pod && q.Spec.NodeName == node {
					return true
				}
			}
			return false
		})
	}
	bind("own", "n1")
	if e.r.foreignSince(base, written) {
		t.Error("this pass's own pod, bound where its claim was allocated, taken for someone else's")
	}
	bind("elsewhere", "n2")
	if !e.r.foreignSince(base, written) {
		t.Error("a pod bound to another node than its claim's not seen")
	}
	base = e.r.cachedAllocations()
	bind("other", "n1")
	if !e.r.foreignSince(base, written) {
		t.Error("a pod using a claim this pass did not write not seen")
	}
}
