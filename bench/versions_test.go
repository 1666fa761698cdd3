package bench

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/model"
)

// TestMIGVersionsFleet: in the versions fleet the v0.4.0 nodes (node-000,
// node-002) publish no whole A100, the v25.12.0 nodes do; the whole family's
// claims run unchanged and whole GPUs are allocated on v25.12.0 nodes only.
func TestMIGVersionsFleet(t *testing.T) {
	insts, err := Generate("mig", Size{Nodes: 4, GPUs: 2, Claims: 10}, 1, GenerateOptions{MIGGPU: "versions", MIGFamily: "whole"})
	if err != nil {
		t.Fatal(err)
	}
	objs := insts[0].Objs
	whole := map[string]int{}
	for _, s := range objs.Slices {
		for _, d := range s.Spec.Devices {
			if d.Name == "gpu-0" || d.Name == "gpu-1" {
				whole[*s.Spec.NodeName]++
			}
		}
	}
	if whole["node-000"] != 0 || whole["node-002"] != 0 || whole["node-001"] != 2 || whole["node-003"] != 2 {
		t.Fatalf("whole GPUs per node %v", whole)
	}
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
	wholeAllocated := 0
	for _, c := range claims {
		if c.Status.Allocation == nil || c.Spec.Devices.Requests[0].Exactly == nil || c.Spec.Devices.Requests[0].Exactly.DeviceClassName != "gpu.nvidia.com" {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			wholeAllocated++
			if r.Pool != "node-001" && r.Pool != "node-003" {
				t.Errorf("%s: whole GPU %s on %s, a v0.4.0 node", c.Name, r.Device, r.Pool)
			}
		}
	}
	if wholeAllocated == 0 {
		t.Fatal("no whole GPU allocated: the test shows nothing")
	}
}
