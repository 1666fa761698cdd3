package k8s

import (
	"bytes"
	"context"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
)

const driver = "gpu.example.com"

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

// slice publishes n whole GPUs on a node.
func slice(nodeName string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(nodeName),
			Pool:     resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := 0; i < n; i++ {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "gpu-" + string(rune('0'+i))})
	}
	return s
}

func class() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}},
	}
}

// onN1 is the allocation of gpu-0 on node n1, as the scheduler writes it.
func onN1() *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: driver, Pool: "n1", Device: "gpu-0"}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}},
	}
}

func claim(name string, count int64, labels map[string]string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name), Labels: labels, ResourceVersion: "1"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count},
		}}}},
	}
}

func gatedPod(name string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("pod-" + name)},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: SchedulingGate}, {Name: "other.example/gate"}},
			Containers:      []corev1.Container{{Name: "c", Image: "x"}},
		},
	}
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

type env struct {
	client *fake.Clientset
	r      *Reconciler
	out    *bytes.Buffer
}

func newEnv(t *testing.T, opts Options, objs ...runtime.Object) *env {
	t.Helper()
	client := fake.NewClientset(objs...)
	opts.Defaults()
	opts.SettleTimeout = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := NewCache(client, opts)
	c.Start(ctx)
	if !c.WaitForSync(ctx) {
		t.Fatal("cache did not sync")
	}
	out := &bytes.Buffer{}
	return &env{client: client, out: out, r: &Reconciler{Client: client, Cache: c, Opts: opts, Log: zap.NewNop(), Metrics: NewMetrics(), DryRunOut: out}}
}

func (e *env) claim(t *testing.T, name string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := e.client.ResourceV1().ResourceClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := e.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// allFeasible checks every claim the fake API holds with the independent
// checker: no device twice, selectors hold.
func (e *env) allFeasible(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cl, _ := e.client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	sl, _ := e.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	dc, _ := e.client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	nl, _ := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	objs := &input.Objects{}
	for i := range cl.Items {
		objs.Claims = append(objs.Claims, &cl.Items[i])
	}
	for i := range sl.Items {
		objs.Slices = append(objs.Slices, &sl.Items[i])
	}
	for i := range dc.Items {
		objs.Classes = append(objs.Classes, &dc.Items[i])
	}
	for i := range nl.Items {
		objs.Nodes = append(objs.Nodes, &nl.Items[i])
	}
	if err := check.CheckAll(objs, check.Options{}); err != nil {
		t.Fatalf("cluster state infeasible: %v", err)
	}
}

func TestPassAllocatesGatedPodsClaimsAndRemovesGate(t *testing.T) {
	e := newEnv(t, Options{}, node("n1"), slice("n1", 2), class(),
		claim("a", 1, nil), claim("b", 1, nil), claim("other", 1, nil), gatedPod("p", "a", "b"))
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Allocated != 2 || res.Ungated != 1 || res.Pending != 2 {
		t.Fatalf("result %+v, want 2 allocated, 1 ungated, 2 pending", res)
	}
	for _, n := range []string{"a", "b"} {
		c := e.claim(t, n)
		if c.Status.Allocation == nil {
			t.Fatalf("claim %s not allocated", n)
		}
		if !contains(c.Finalizers, Finalizer) {
			t.Errorf("claim %s lacks finalizer %s", n, Finalizer)
		}
		if c.Annotations[AllocatedByAnnotation] == "" {
			t.Errorf("claim %s lacks %s", n, AllocatedByAnnotation)
		}
	}
	if e.claim(t, "other").Status.Allocation != nil {
		t.Error("claim of no gated pod and without the label was allocated")
	}
	p := e.pod(t, "p")
	if hasGate(p) || len(p.Spec.SchedulingGates) != 1 {
		t.Errorf("gates after pass: %v, want only the other gate", p.Spec.SchedulingGates)
	}
	e.allFeasible(t)
}

func TestPassManagedLabelAndUnallocatable(t *testing.T) {
	managed := map[string]string{ManagedLabel: "true"}
	e := newEnv(t, Options{}, node("n1"), slice("n1", 2), class(),
		claim("two", 2, managed), claim("one", 1, managed))
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Allocated != 1 || res.Unallocated != 1 {
		t.Fatalf("result %+v, want 1 allocated and 1 unallocatable", res)
	}
	// max-claims with binpack: one of them; whichever lost is annotated.
	var lost *resourceapi.ResourceClaim
	for _, n := range []string{"two", "one"} {
		if c := e.claim(t, n); c.Status.Allocation == nil {
			lost = c
		}
	}
	if lost == nil || lost.Annotations[UnallocatableAnnotation] == "" {
		t.Fatalf("unallocatable claim has no %s annotation: %+v", UnallocatableAnnotation, lost)
	}
	e.allFeasible(t)
}

func TestPassDryRunWritesNothing(t *testing.T) {
	e := newEnv(t, Options{DryRun: true}, node("n1"), slice("n1", 1), class(), claim("a", 1, nil), gatedPod("p", "a"))
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Allocated != 1 {
		t.Fatalf("result %+v, want 1 would-be allocation", res)
	}
	if e.claim(t, "a").Status.Allocation != nil || !hasGate(e.pod(t, "p")) {
		t.Fatal("dry run wrote")
	}
	if !strings.Contains(e.out.String(), "device: gpu-0") {
		t.Fatalf("dry-run output lacks the allocation:\n%s", e.out.String())
	}
	for _, a := range e.client.Actions() {
		if v := a.GetVerb(); v != "list" && v != "watch" && v != "get" {
			t.Errorf("dry run made a %s %s request", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestPassRespectsExistingAllocations(t *testing.T) {
	taken := claim("taken", 1, nil)
	taken.Status.Allocation = onN1()
	e := newEnv(t, Options{}, node("n1"), slice("n1", 2), class(), taken,
		claim("a", 1, map[string]string{ManagedLabel: "true"}), claim("b", 1, map[string]string{ManagedLabel: "true"}))
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Allocated != 1 || res.Unallocated != 1 {
		t.Fatalf("result %+v, want 1 allocated, 1 unallocatable", res)
	}
	e.allFeasible(t)
}

func TestCheckRefusesDeviceTakenMeanwhile(t *testing.T) {
	e := newEnv(t, Options{}, node("n1"), slice("n1", 1), class(), claim("a", 1, nil))
	cand := e.claim(t, "a").DeepCopy()
	cand.Status.Allocation = onN1()
	if err := e.r.checkWith(nil, cand); err != nil {
		t.Fatalf("free device refused: %v", err)
	}
	// Another writer takes gpu-0; the written map overlays it as the cache
	// would show it.
	other := claim("other", 1, nil)
	other.Status.Allocation = cand.Status.Allocation.DeepCopy()
	if _, err := e.client.ResourceV1().ResourceClaims("default").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := e.r.checkWith(nil, cand)
		if err != nil {
			if !strings.Contains(err.Error(), "gpu-0") {
				t.Errorf("error does not name the device: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("device taken by another claim was not refused")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPodClaimNamesTemplates(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
		{Name: "x", ResourceClaimTemplateName: ptr.To("t")},
		{Name: "y", ResourceClaimName: ptr.To("shared")},
	}}}
	if names, complete := podClaimNames(p); complete || len(names) != 1 || names[0] != "shared" {
		t.Fatalf("before the claim exists: %v %v", names, complete)
	}
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "x", ResourceClaimName: ptr.To("p-x-abc")}}
	if names, complete := podClaimNames(p); !complete || len(names) != 2 || names[0] != "p-x-abc" {
		t.Fatalf("after: %v %v", names, complete)
	}
}

func TestNamespaceFilter(t *testing.T) {
	c := claim("a", 1, map[string]string{ManagedLabel: "true"})
	c.Namespace = "other"
	s := &Snapshot{Claims: []*resourceapi.ResourceClaim{c, claim("b", 1, map[string]string{ManagedLabel: "true"})}}
	if got := ours(s, "default"); len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("ours = %v", got)
	}
	if got := ours(s, ""); len(got) != 2 {
		t.Fatalf("ours (all namespaces) = %d claims", len(got))
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// A ResourceSlice that cannot be read (here a node selector with an
// operator no API server would have accepted) is left out with a Warning
// Event and the metric; the other pools are still allocated from.
func TestPassSkipsBadSlice(t *testing.T) {
	bad := slice("n2", 1)
	bad.Spec.NodeName = nil
	bad.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "zone", Operator: "Bogus", Values: []string{"a"}}}}}}
	e := newEnv(t, Options{}, node("n1"), node("n2"), slice("n1", 1), bad, class(), claim("a", 1, map[string]string{ManagedLabel: "true"}))
	rec := record.NewFakeRecorder(10)
	e.r.Recorder = rec
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatalf("one bad slice failed the pass: %v", err)
	}
	if res.Allocated != 1 {
		t.Errorf("result %+v, want the claim allocated from the good pool", res)
	}
	if n := counterValue(t, e.r.Metrics.Skipped.WithLabelValues("ResourceSlice")); n != 1 {
		t.Errorf("drasat_skipped_objects_total{kind=ResourceSlice} = %v, want 1", n)
	}
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, ReasonSkipped) || !strings.Contains(ev, "n2") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no Event for the skipped slice")
	}
	e.allFeasible(t)
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A batch with an expensive CEL selector under a short pass budget: the
// build stops evaluating it at the budget, its claim is unallocatable
// with a reason naming the selector and the time budget, and the rest of
// the batch is allocated in the same pass (building past the budget used
// to fail the whole batch, every pass).
func TestPassExpensiveSelectorOnlyFailsItsClaim(t *testing.T) {
	e := slowSelectorEnv(t)
	res, err := e.r.Pass(context.Background())
	if err != nil {
		t.Fatalf("pass: %v; want the batch solved without the slow claim", err)
	}
	if res.Allocated != 1 || res.Unallocated != 1 {
		t.Fatalf("result %+v, want 1 allocated and 1 unallocatable", res)
	}
	if e.claim(t, "quick").Status.Allocation == nil {
		t.Error("the claim with a cheap selector was not allocated")
	}
	why := e.claim(t, "slow").Annotations[UnallocatableAnnotation]
	if !strings.Contains(why, "time budget") || !strings.Contains(why, "idx >= 0") {
		t.Errorf("slow claim's reason %q; want the time budget and its selector", why)
	}
	e.allFeasible(t)
}

// slowSelectorEnv is a node with 200 devices, a managed claim "slow" whose
// selector costs about a second over them and a managed claim "quick",
// with a pass budget (--timeout) of 300 ms.
func slowSelectorEnv(t *testing.T) *env {
	t.Helper()
	managed := map[string]string{ManagedLabel: "true"}
	l := "[" + strings.TrimSuffix(strings.Repeat("1,", 40), ",") + "]"
	expr := "device.attributes['" + driver + "'].idx >= 0 && " + l + ".all(x, " + l + ".all(y, " + l + ".all(z, x+y+z > 0)))"
	big := slice("n1", 1)
	big.Name, big.Spec.Pool.Name = "n1-many", "n1-many"
	big.Spec.Devices = nil
	for i := 0; i < 200; i++ {
		big.Spec.Devices = append(big.Spec.Devices, resourceapi.Device{Name: "d" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"idx": {IntValue: ptr.To(int64(i))}}})
	}
	slow := claim("slow", 1, managed)
	slow.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
	return newEnv(t, Options{Timeout: 300 * time.Millisecond}, node("n1"), big, class(), slow, claim("quick", 1, managed))
}
