package driverprofile

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/explain"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// allClasses are every driver's DeviceClasses, installed in every test
// cluster as a cluster admin would install the drivers' charts.
func allClasses() []*resourceapi.DeviceClass {
	return append(NVIDIAClasses(), ExampleClass(ExampleGPUDriver), ExampleClass(ExampleNetDriver), NICClass())
}

// profileNode is one node of the profile with two devices, beside four of
// our NICs (unless the profile is the NIC), so that GPU+NIC claims can
// align by PCIe root.
func profileNode(p Profile) *input.Objects {
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}
	objs.Classes = allClasses()
	objs.Slices = p.Node("node-1", 2).Slices
	if !p.Ours {
		objs.Slices = append(objs.Slices, NICs("node-1", 4).Slices...)
	}
	return objs
}

// allocatesOn is where each user claim must allocate, by profile name; it
// must fail (and be explained) on every other profile.
var allocatesOn = map[string][]string{
	"single-gpu": {"nvidia-v0.4.0-mig-h100-80gb", "nvidia-v25.12.0-mig-a100-40gb", "nvidia-v25.12.0-mig-a100-80gb", "nvidia-v25.12.0-mig-h100-80gb",
		"nvidia-v25.12.0-nomig-a100-40gb", "nvidia-v25.12.0-nomig-a100-80gb", "nvidia-v25.12.0-nomig-h100-80gb"},
	// Profile names are per model: 1g.5gb exists on the A100-40GB only.
	"mig-devices": {"nvidia-v0.4.0-mig-a100-40gb", "nvidia-v25.12.0-mig-a100-40gb"},
	"mig1g": {"nvidia-v0.4.0-mig-a100-40gb", "nvidia-v0.4.0-mig-a100-80gb", "nvidia-v0.4.0-mig-h100-80gb",
		"nvidia-v25.12.0-mig-a100-40gb", "nvidia-v25.12.0-mig-a100-80gb", "nvidia-v25.12.0-mig-h100-80gb"},
	"migdevs": {"nvidia-v0.4.0-mig-a100-40gb", "nvidia-v0.4.0-mig-a100-80gb", "nvidia-v0.4.0-mig-h100-80gb",
		"nvidia-v25.12.0-mig-a100-40gb", "nvidia-v25.12.0-mig-a100-80gb", "nvidia-v25.12.0-mig-h100-80gb"},
	// v0.4.0 publishes no whole A100 in MIG mode.
	"a100-by-product": {"nvidia-v25.12.0-mig-a100-40gb", "nvidia-v25.12.0-nomig-a100-40gb"},
	// index is not published: a CEL runtime error on A100s, no match elsewhere.
	"a100-by-index": nil,
	"gpu-nic": {"nvidia-v0.4.0-mig-h100-80gb", "nvidia-v25.12.0-mig-a100-40gb", "nvidia-v25.12.0-mig-a100-80gb", "nvidia-v25.12.0-mig-h100-80gb",
		"nvidia-v25.12.0-nomig-a100-40gb", "nvidia-v25.12.0-nomig-a100-80gb", "nvidia-v25.12.0-nomig-h100-80gb"},
	// Only v0.4.0 gives MIG devices their parent's pcieRoot.
	"mig-nic":                {"nvidia-v0.4.0-mig-a100-40gb", "nvidia-v0.4.0-mig-a100-80gb", "nvidia-v0.4.0-mig-h100-80gb"},
	"example-gpu":            {"example-v0.4.0-gpu", "example-v0.4.0-gpu-partitions", "example-v0.4.0-gpu-shared"},
	"example-gpu-partitions": {"example-v0.4.0-gpu", "example-v0.4.0-gpu-partitions", "example-v0.4.0-gpu-shared"},
	"example-gpu-share":      {"example-v0.4.0-gpu", "example-v0.4.0-gpu-partitions", "example-v0.4.0-gpu-shared"},
	"example-nic":            {"example-v0.4.0-net"},
}

// TestUserClaims runs every user claim alone against one node of every
// profile with drasat's engine: it must allocate where allocatesOn says
// (the allocation passing the independent checker) and be explained
// everywhere else.
func TestUserClaims(t *testing.T) {
	ctx := context.Background()
	for _, uc := range UserClaims() {
		want, ok := allocatesOn[uc.Claim.Name]
		if !ok {
			t.Fatalf("claim %s has no expectation", uc.Claim.Name)
		}
		for _, p := range Profiles() {
			t.Run(uc.Claim.Name+"/"+p.Name, func(t *testing.T) {
				objs := profileNode(p)
				objs.Claims = []*resourceapi.ResourceClaim{uc.Claim.DeepCopy()}
				pr, err := model.Build(ctx, objs, model.Options{})
				if err != nil {
					t.Fatal(err)
				}
				res, err := alloc.Run(ctx, pr, alloc.Options{Timeout: 20 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				got := len(res.Assignments) == 1
				if got != slices.Contains(want, p.Name) {
					t.Fatalf("allocated %v, want %v (%s; rejected: %v)", got, !got, uc.Source, res.Rejected)
				}
				if got {
					claims, err := alloc.Allocated(pr, res)
					if err != nil {
						t.Fatal(err)
					}
					if err := check.Check(objs, claims, check.Options{}); err != nil {
						t.Fatalf("checker rejects the allocation: %v", err)
					}
					return
				}
				x, err := explain.Explain(ctx, pr, pr.Claims[0], nil, explain.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if len(x.Reasons) == 0 || x.Reasons[0].Message == "" {
					t.Fatalf("no explanation: %+v", x)
				}
			})
		}
	}
}

// TestUserClaimsMixedVersions: on a cluster mid-upgrade (node-1 on NVIDIA's
// driver v0.4.0, node-2 on v25.12.0, A100-40GB, our NICs beside), every
// user claim runs unchanged and allocates exactly when it allocates on
// one of the two versions alone.
func TestUserClaimsMixedVersions(t *testing.T) {
	ctx := context.Background()
	objs := &input.Objects{CompatibleOnlyWith: map[input.DeviceID]string{}, Origin: map[string]string{}}
	objs.Classes = allClasses()
	for _, n := range []struct {
		node string
		v    NVIDIAVersion
	}{{"node-1", NVIDIAv040}, {"node-2", NVIDIAv25120}} {
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.node}})
		objs.Slices = append(objs.Slices, NVIDIADynamicMIG(n.v, A100SXM440GB, n.node, 2).Slices...)
		objs.Slices = append(objs.Slices, NICs(n.node, 4).Slices...)
	}
	for _, uc := range UserClaims() {
		on040 := slices.Contains(allocatesOn[uc.Claim.Name], "nvidia-v0.4.0-mig-a100-40gb")
		on2512 := slices.Contains(allocatesOn[uc.Claim.Name], "nvidia-v25.12.0-mig-a100-40gb")
		want := on040 || on2512
		one := *objs
		one.Claims = []*resourceapi.ResourceClaim{uc.Claim.DeepCopy()}
		p, err := model.Build(ctx, &one, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := alloc.Run(ctx, p, alloc.Options{Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(res.Assignments) == 1; got != want {
			t.Errorf("%s: allocated %v, want %v (%v)", uc.Claim.Name, got, want, res.Rejected)
			continue
		}
		if want {
			claims, err := alloc.Allocated(p, res)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Check(&one, claims, check.Options{}); err != nil {
				t.Errorf("%s: %v", uc.Claim.Name, err)
			}
			// A claim that only one version can serve lands on its node.
			pool := claims[0].Status.Allocation.Devices.Results[0].Pool
			if on040 != on2512 && (pool == "node-1") != on040 {
				t.Errorf("%s: allocated on %s", uc.Claim.Name, pool)
			}
		}
	}
}
