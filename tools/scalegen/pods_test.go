package scalegen

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// The pods are valid input with what they promise (pods of two claims,
// a tainted and a cordoned node, zone selectors, tolerations), read back
// from YAML, and drasat's answer on them passes the independent checker
// with the pods' rules: every admitted claim's pods fit where it put
// them, a pod's two claims on one node. The same seed, the same objects.
func TestAddPods(t *testing.T) {
	gen := func() *input.Objects {
		objs := Generate(Config{Nodes: 32, GPUs: 1, Claims: 160, Seed: 2})
		AddPods(objs, 16, 2)
		return objs
	}
	objs := gen()
	pairs, selectors, tolerations := 0, 0, 0
	for _, p := range objs.Pods {
		if len(p.Spec.ResourceClaims) == 2 {
			pairs++
		}
		if len(p.Spec.NodeSelector) > 0 {
			selectors++
		}
		if len(p.Spec.Tolerations) > 0 {
			tolerations++
		}
	}
	tainted, cordoned := 0, 0
	for _, n := range objs.Nodes {
		if len(n.Spec.Taints) > 0 {
			tainted++
		}
		if n.Spec.Unschedulable {
			cordoned++
		}
	}
	if pairs == 0 || selectors == 0 || tolerations == 0 || tainted == 0 || cordoned == 0 {
		t.Fatalf("pods of two claims %d, with selectors %d, tolerations %d; nodes tainted %d, cordoned %d: want some of each", pairs, selectors, tolerations, tainted, cordoned)
	}
	if err := check.CheckAll(objs, check.Options{}); err != nil {
		t.Fatalf("running allocations and bound pods: %v", err)
	}
	var a, b bytes.Buffer
	if err := WriteYAML(&a, objs); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(&b, gen()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same seed gave different objects")
	}
	back, _, err := input.Load([]string{"-"}, bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Pods) != len(objs.Pods) {
		t.Fatalf("read back %d pods, wrote %d", len(back.Pods), len(objs.Pods))
	}
	p, err := model.Build(context.Background(), back, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	var allocated = claims[:0:0]
	for _, c := range claims {
		if c.Status.Allocation != nil {
			allocated = append(allocated, c)
		}
	}
	if err := check.Check(back, allocated, check.Options{}); err != nil {
		t.Fatal(err)
	}
	if len(allocated) == 0 || len(allocated) == len(p.Claims) {
		t.Fatalf("admitted %d of %d: want an oversubscribed cluster", len(allocated), len(p.Claims))
	}
	t.Logf("admitted %d of %d, bound %d, optimal %v", res.Stats.Admitted, res.Stats.Pending, res.Stats.Bound, res.Stats.Optimal)
}
