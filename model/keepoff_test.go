package model

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/drasat/drasat/input"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KeepOff removes one claim's candidates on a node and leaves an identical
// claim, whose candidate list the build shares, as it was.
func TestKeepOff(t *testing.T) {
	paths, _ := filepath.Glob("../examples/mig-a100/[012]*.yaml")
	objs, _, err := input.Load(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	gpu := func(name string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 1, AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}
	}
	objs.Claims = []*resourceapi.ResourceClaim{gpu("a"), gpu("b")}
	p, err := Build(context.Background(), objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.Claims[0], p.Claims[1]
	if a.ClassKey() != b.ClassKey() || len(a.CandidateNodes(p)) != 2 {
		t.Fatalf("before: keys equal %v, nodes %v", a.ClassKey() == b.ClassKey(), a.CandidateNodes(p))
	}
	before := len(b.Requests[0].Alternatives[0].Candidates)
	p.KeepOff(a, 0)
	alt := a.Requests[0].Alternatives[0]
	for _, d := range alt.Candidates {
		if p.Devices[d].Reaches(0) {
			t.Fatalf("candidate %s on the node kept off", p.Devices[d].ID)
		}
	}
	if len(alt.Candidates) == 0 || len(alt.CandidatesOn(0)) != 0 || len(alt.CandidatesOn(1)) == 0 {
		t.Fatalf("candidates %d, on node 0 %d, on node 1 %d", len(alt.Candidates), len(alt.CandidatesOn(0)), len(alt.CandidatesOn(1)))
	}
	if nodes := a.CandidateNodes(p); len(nodes) != 1 || nodes[0] != 1 {
		t.Fatalf("candidate nodes %v, want [1]", nodes)
	}
	if a.ClassKey() == b.ClassKey() {
		t.Fatal("the claim kept off stays interchangeable with the other")
	}
	if got := len(b.Requests[0].Alternatives[0].Candidates); got != before || len(b.Requests[0].Alternatives[0].CandidatesOn(0)) == 0 {
		t.Fatalf("the other claim changed: %d candidates, had %d", got, before)
	}
}
