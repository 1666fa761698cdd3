package scalegen

import (
	"bytes"
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// The generated cluster is valid input: no validation finding, the running
// allocations hold together, and it reads back from its YAML as written.
func TestGenerateIsValid(t *testing.T) {
	cfg := Config{Nodes: 4, GPUs: 8, Claims: 120, Seed: 3}
	objs := Generate(cfg)
	if fs, err := model.Validate(context.Background(), objs); err != nil || len(fs) > 0 {
		t.Fatalf("findings %v, err %v", fs, err)
	}
	if err := check.CheckAll(objs, check.Options{}); err != nil {
		t.Fatalf("running allocations: %v", err)
	}
	running, pending := 0, 0
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			running++
		} else {
			pending++
		}
	}
	if pending != cfg.Claims || running == 0 {
		t.Fatalf("%d pending (want %d), %d running (want some)", pending, cfg.Claims, running)
	}
	var a, b bytes.Buffer
	if err := WriteYAML(&a, objs); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(&b, Generate(cfg)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same Config gave different objects")
	}
	back, _, err := input.Load([]string{"-"}, bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Claims) != len(objs.Claims) || len(back.Slices) != len(objs.Slices) || len(back.Nodes) != cfg.Nodes {
		t.Fatalf("read back %d claims, %d slices, %d nodes; wrote %d, %d, %d", len(back.Claims), len(back.Slices), len(back.Nodes), len(objs.Claims), len(objs.Slices), cfg.Nodes)
	}
}

// drasat's answer on a generated cluster is valid (the independent
// checker) and admits at least what first-fit in arrival order admits.
func TestAllocateGenerated(t *testing.T) {
	objs := Generate(Config{Nodes: 6, GPUs: 8, Claims: 260, Seed: 5})
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(objs, claims, check.Options{}); err != nil {
		t.Fatal(err)
	}
	ff := len(baseline.FirstFit(p, p.Claims).Assignments)
	if res.Stats.Admitted < ff || res.Stats.Admitted == res.Stats.Pending {
		t.Fatalf("admitted %d of %d, first-fit %d: want at least first-fit, on an oversubscribed cluster", res.Stats.Admitted, res.Stats.Pending, ff)
	}
	t.Logf("admitted %d of %d (bound %d), first-fit %d", res.Stats.Admitted, res.Stats.Pending, res.Stats.Bound, ff)
}

// The rich family is valid input on its mixed fleet, draws every kind of
// claim, holds running allocations, and is deterministic; the default
// family does not depend on it.
func TestGenerateRichIsValid(t *testing.T) {
	cfg := Config{Nodes: 4, GPUs: 8, Claims: 200, Seed: 3, Family: "rich"}
	objs := Generate(cfg)
	if fs, err := model.Validate(context.Background(), objs); err != nil || len(fs) > 0 {
		t.Fatalf("findings %v, err %v", fs, err)
	}
	if err := check.CheckAll(objs, check.Options{}); err != nil {
		t.Fatalf("running allocations: %v", err)
	}
	products := map[string]bool{}
	for _, n := range objs.Nodes {
		products[n.Labels[gpuModelLabel]] = true
	}
	if len(products) != 3 {
		t.Fatalf("node models %v, want A100-40GB, A100-80GB and H100", products)
	}
	// Every kind is drawn: count the claims by their shape.
	kinds := map[string]int{}
	running := 0
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			running++
			continue
		}
		kinds[richKindOf(c)]++
	}
	if len(kinds) != 6 || running == 0 {
		t.Fatalf("claims by kind %v (want all 6), %d running", kinds, running)
	}
	var a, b, def bytes.Buffer
	if err := WriteYAML(&a, objs); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(&b, Generate(cfg)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same Config gave different objects")
	}
	cfg.Family = "default"
	if err := WriteYAML(&def, Generate(cfg)); err != nil {
		t.Fatal(err)
	}
	var empty bytes.Buffer
	cfg.Family = ""
	if err := WriteYAML(&empty, Generate(cfg)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(def.Bytes(), empty.Bytes()) || bytes.Equal(def.Bytes(), a.Bytes()) {
		t.Fatal(`family "default" differs from "", or equals rich`)
	}
	back, _, err := input.Load([]string{"-"}, bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Claims) != len(objs.Claims) || len(back.Slices) != len(objs.Slices) {
		t.Fatalf("read back %d claims, %d slices; wrote %d, %d", len(back.Claims), len(back.Slices), len(objs.Claims), len(objs.Slices))
	}
}

// drasat's answer on a rich cluster is valid (the independent checker),
// never below first-fit and never above its bound; and one claim of each
// kind alone is admitted (a kind no device can take would show here: on a
// full cluster the objective may leave a whole kind out).
func TestAllocateRichGenerated(t *testing.T) {
	objs := Generate(Config{Nodes: 4, GPUs: 8, Claims: 240, Seed: 7, Family: "rich"})
	one := *objs
	one.Claims = nil
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			one.Claims = append(one.Claims, c)
		}
	}
	for _, k := range richKinds {
		one.Claims = append(one.Claims, k.claim("one-"+k.name))
	}
	p1, err := model.Build(context.Background(), &one, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res1, err := alloc.Run(context.Background(), p1, alloc.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res1.Stats.Pending != len(richKinds) || res1.Stats.Admitted != len(richKinds) {
		t.Fatalf("one claim of each kind: %d of %d admitted", res1.Stats.Admitted, res1.Stats.Pending)
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(objs, claims, check.Options{}); err != nil {
		t.Fatal(err)
	}
	ff := len(baseline.FirstFit(p, p.Claims).Assignments)
	if res.Stats.Admitted < ff || res.Stats.Admitted == res.Stats.Pending || int64(res.Stats.Admitted) > res.Stats.Bound {
		t.Fatalf("admitted %d of %d, first-fit %d, bound %d", res.Stats.Admitted, res.Stats.Pending, ff, res.Stats.Bound)
	}
	t.Logf("admitted %d of %d (bound %d, optimal %v), first-fit %d", res.Stats.Admitted, res.Stats.Pending, res.Stats.Bound, res.Stats.Optimal, ff)
}

// richKindOf names a rich claim's kind by its shape.
func richKindOf(c *resourceapi.ResourceClaim) string {
	d := c.Spec.Devices
	switch {
	case d.Requests[0].FirstAvailable != nil:
		return "firstAvailable"
	case len(d.Requests) == 2:
		return "two requests"
	case len(d.Constraints) == 1 && d.Constraints[0].DistinctAttribute != nil:
		return "distinct"
	case len(d.Constraints) == 1 && d.Requests[0].Exactly.Count == 2:
		return "count 2 on one GPU"
	case d.Requests[0].Exactly.DeviceClassName == "gpu.nvidia.com":
		return "whole GPU"
	}
	return "one MIG device"
}
