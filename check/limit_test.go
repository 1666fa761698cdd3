package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// loadFixture reads a YAML fixture of ../testdata (shared with the
// engine's tests: data, not code).
func loadFixture(t *testing.T, name string) *input.Objects {
	t.Helper()
	objs, _, err := input.Load([]string{"../testdata/" + name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// allocate returns a copy of the fixture's only claim with these results
// (request=device in pool p1 of gpu.example.com), for node-1.
func allocate(objs *input.Objects, results ...string) *resourceapi.ResourceClaim {
	return allocateOn(objs, "node-1", "p1", results...)
}

func allocateOn(objs *input.Objects, node, pool string, results ...string) *resourceapi.ResourceClaim {
	out := objs.Claims[0].DeepCopy()
	var rs []resourceapi.DeviceRequestAllocationResult
	for _, r := range results {
		req, dev, _ := strings.Cut(r, "=")
		rs = append(rs, res(req, "gpu.example.com", pool, dev))
	}
	out.Status.Allocation = allocation(nodeSel(node), rs...)
	return out
}

// TestResultLimitUnwinds: ../testdata/order/limit-unwind.yaml. The
// allocator's search unwinds past the result limit to the firstAvailable
// request (no error), so the claim is valid with the devices it picks, and
// only with those.
func TestResultLimitUnwinds(t *testing.T) {
	objs := loadFixture(t, "order/limit-unwind.yaml")
	ys := []string{"first/one=x-00"}
	for i := 0; i < 13; i++ {
		ys = append(ys, "all=y-"+[]string{"00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12"}[i])
	}
	if err := Check(objs, []*resourceapi.ResourceClaim{allocate(objs, ys...)}, Options{}); err != nil {
		t.Errorf("the allocator's pick is rejected: %v", err)
	}
	ys[0] = "first/one=x-01"
	err := Check(objs, []*resourceapi.ResourceClaim{allocate(objs, ys...)}, Options{})
	if err == nil || !strings.Contains(err.Error(), "must be what it picks") {
		t.Errorf("other devices than the allocator's pick: %v, want a violation", err)
	}
}

// TestResultLimitPerNode: before its search the allocator adds up, per
// node, the fewest results of every request, allocationMode All counting
// every matching device the node sees; past 32 it fails, and the error
// aborts the pod's scheduling attempt even where the claim fits. With
// subrequest many asking for 40 (past the limit alone) and subrequest one
// for 19 x, node-1 needs 19 + 13 y = 32 (fine) or,
// with one more y, 33; node-2 (19 x, one y) fits either way.
func TestResultLimitPerNode(t *testing.T) {
	for _, ys := range []int{13, 14} {
		objs := loadFixture(t, "order/limit-unwind.yaml")
		objs.Claims[0].Spec.Devices.Requests[0].FirstAvailable[0].Count = 40 // never searched
		objs.Claims[0].Spec.Devices.Requests[0].FirstAvailable[1].Count = 19
		devs := &objs.Slices[0].Spec.Devices
		if ys == 14 {
			extra := (*devs)[21].DeepCopy()
			extra.Name = "y-13"
			*devs = append(*devs, *extra)
		}
		node2 := objs.Slices[0].DeepCopy()
		node2.Name, node2.Spec.NodeName, node2.Spec.Pool.Name = "s2", ptr.To("node-2"), "p2"
		node2.Spec.Devices = append(node2.Spec.Devices[:19], node2.Spec.Devices[21])
		objs.Slices = append(objs.Slices, node2)
		node := objs.Nodes[0].DeepCopy()
		node.Name = "node-2"
		objs.Nodes = append(objs.Nodes, node)
		var results []string
		for _, d := range node2.Spec.Devices {
			req := "first/one"
			if d.Name == "y-00" {
				req = "all"
			}
			results = append(results, req+"="+d.Name)
		}
		err := Check(objs, []*resourceapi.ResourceClaim{allocateOn(objs, "node-2", "p2", results...)}, Options{})
		want := fmt.Sprintf("request all: adding %d devices exceeds the limit of 32 results, with 19 already accounted for, on node node-1", ys)
		switch {
		case ys == 13 && err != nil:
			t.Errorf("node-1 needs 32 results: %v", err)
		case ys == 14 && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("node-1 needs 33 results: %v, want %q", err, want)
		}
	}
}
