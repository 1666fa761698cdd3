package scalegen

import (
	"bytes"
	"context"
	"testing"
	"time"

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
