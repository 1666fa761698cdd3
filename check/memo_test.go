package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestMemoSameVerdicts: a Memo kept across checks gives the verdicts a check
// without one gives, while the slices change (a new resourceVersion: the
// device the allocator reaches first loses the attribute the claim's
// selector reads, so a selector now fails at run time and the allocation
// of the other device is not one the allocator makes) and change back;
// objects without resourceVersions are not memoised. A memo kept across
// the change fails it.
func TestMemoSameVerdicts(t *testing.T) {
	load := func(rv, first, second string) *input.Objects {
		docs := `
apiVersion: v1
kind: Node
metadata: {name: node-1, uid: n1, resourceVersion: "1"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu, uid: c1, resourceVersion: "1"}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s1, uid: s1, resourceVersion: "` + rv + `"}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p1, generation: 1, resourceSliceCount: 1}
  devices:
  - ` + first + `
  - ` + second + `
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: x, namespace: default}
spec:
  devices:
    requests:
    - name: one
      exactly:
        deviceClassName: gpu
        selectors: [{cel: {expression: 'device.attributes["gpu.example.com"].opt >= 1'}}]
`
		o, _, err := input.Load([]string{"-"}, strings.NewReader(docs))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	alloc := func(o *input.Objects) []*resourceapi.ResourceClaim {
		out := o.Claims[0].DeepCopy()
		out.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: nodeSel("node-1"), Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "one", Driver: gpuDriver, Pool: "p1", Device: "b"}}}}
		return []*resourceapi.ResourceClaim{out}
	}
	aOpt, aNone, b := "{name: a, attributes: {opt: {int: 1}}}", "{name: a}", "{name: b, attributes: {opt: {int: 1}}}"
	memo := &Memo{}
	failed := 0
	for i, o := range []*input.Objects{
		load("1", aOpt, b), load("1", aOpt, b),
		load("2", aNone, b), load("2", aNone, b),
		load("3", aOpt, b),
	} {
		want := fmt.Sprint(Check(o, alloc(o), Options{}))
		if got := fmt.Sprint(Check(o, alloc(o), Options{Memo: memo})); got != want {
			t.Errorf("check %d: with the memo %s, without %s", i, got, want)
		}
		if want != "<nil>" {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("%d checks failed, want the 2 where a's selector fails before b is reached", failed)
	}
	// Read from files, without resourceVersions: no memo is lent.
	o := load("1", aOpt, b)
	for _, s := range o.Slices {
		s.ResourceVersion, s.UID = "", types.UID("")
	}
	if m, done := memo.lend(o); m != nil {
		done()
		t.Error("a memo lent for slices without a resourceVersion")
	}
}
