package driverprofile

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func deviceNames(inv Inventory) []string {
	var out []string
	for _, s := range inv.Slices {
		for _, d := range s.Spec.Devices {
			out = append(out, d.Name)
		}
	}
	return out
}

func find(t *testing.T, inv Inventory, name string) resourceapi.Device {
	t.Helper()
	for _, s := range inv.Slices {
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("no device %s", name)
	return resourceapi.Device{}
}

// TestNVIDIAFacts checks, independently of the golden files, the facts
// the driver's code fixes and our old fleets had wrong.
func TestNVIDIAFacts(t *testing.T) {
	v25 := NVIDIADynamicMIG(NVIDIAv25120, A100SXM440GB, "n", 2)
	v04 := NVIDIADynamicMIG(NVIDIAv040, A100SXM440GB, "n", 2)
	h04 := NVIDIADynamicMIG(NVIDIAv040, H100SXM580GB, "n", 1)
	// One counters slice, then one device slice per GPU.
	if len(v25.Slices) != 3 || len(v25.Slices[0].Spec.SharedCounters) != 2 || len(v25.Slices[0].Spec.Devices) != 0 {
		t.Fatalf("slice split: %d slices", len(v25.Slices))
	}
	// 25 MIG placements per A100; v25.12.0 adds the whole GPU, v0.4.0 on a
	// MIG-mode A100 does not, on an H100 it does.
	if n := len(v25.Slices[1].Spec.Devices); n != 26 {
		t.Fatalf("v25.12.0 A100: %d devices per GPU, want 26", n)
	}
	if n := len(v04.Slices[1].Spec.Devices); n != 25 || slices.Contains(deviceNames(v04), "gpu-0") {
		t.Fatalf("v0.4.0 A100: %d devices per GPU, want 25 without gpu-0", n)
	}
	if !slices.Contains(deviceNames(h04), "gpu-0") {
		t.Fatal("v0.4.0 H100: no whole GPU")
	}
	// Names and their order: sorted by name, the whole GPU first.
	names := deviceNames(v25)[:3]
	if want := []string{"gpu-0", "gpu-0-mig-1g10gb-15-0", "gpu-0-mig-1g10gb-15-2"}; !slices.Equal(names, want) {
		t.Fatalf("first devices %v, want %v", names, want)
	}
	me := find(t, v25, "gpu-1-mig-1g5gb-me-20-6")
	if *me.Attributes["profile"].StringValue != "1g.5gb+me" || *me.Attributes["productName"].StringValue != "NVIDIA A100-SXM4-40GB" {
		t.Fatalf("1g.5gb+me attributes %v", me.Attributes)
	}
	// The whole GPU: 40192Mi (the 7g.40gb profile's), not 40Gi; no profile.
	gpu := find(t, v25, "gpu-0")
	if m := gpu.Capacity["memory"].Value; m.Cmp(resource.MustParse("40192Mi")) != 0 {
		t.Fatalf("whole GPU memory %s", m.String())
	}
	if _, ok := gpu.Attributes["profile"]; ok {
		t.Fatal("a whole GPU has no profile attribute")
	}
	// MIG devices carry no uuid, index or placement attributes; pcieRoot
	// only in v0.4.0.
	for _, a := range []resourceapi.QualifiedName{"uuid", "index", "minor", "parentIndex", "placementStart", "memorySliceStart"} {
		if _, ok := me.Attributes[a]; ok {
			t.Fatalf("MIG device has %s", a)
		}
	}
	if _, ok := me.Attributes[PCIeRootAttr]; ok {
		t.Fatal("v25.12.0 MIG device has pcieRoot")
	}
	if _, ok := find(t, v04, "gpu-1-mig-1g5gb-me-20-6").Attributes[PCIeRootAttr]; !ok {
		t.Fatal("v0.4.0 MIG device has no pcieRoot")
	}
	// A 3g.20gb at 4 consumes memory slices 4..7 and 42 multiprocessors.
	c := find(t, v25, "gpu-0-mig-3g20gb-9-4").ConsumesCounters[0].Counters
	slice7, sms := c["memory-slice-7"].Value, c["multiprocessors"].Value
	if _, ok := c["memory-slice-3"]; ok || slice7.Value() != 1 || sms.Value() != 42 {
		t.Fatalf("3g.20gb@4 consumes %v", c)
	}
}

// The example driver's UUIDs are those its own code gives a node: the
// eight GPUs of the kind node dra-example-driver-cluster-worker as the
// slice in kubernetes-sigs/dra-example-driver's README (v0.4.0) shows them.
func TestExampleUUIDsMatchREADME(t *testing.T) {
	want := []string{"gpu-18db0e85-99e9-c746-8531-ffeb86328b39", "gpu-93d37703-997c-c46f-a531-755e3e0dc2ac",
		"gpu-ee3e4b55-fcda-44b8-0605-64b7a9967744", "gpu-9ede7e32-5825-a11b-fa3d-bab6d47e0243",
		"gpu-e7b42cb1-4fd8-91b2-bc77-352a0c1f5747", "gpu-f11773a1-5bfb-e48b-3d98-1beb5baaf08e",
		"gpu-0159f35e-99ee-b2b5-74f1-9d18df3f22ac", "gpu-657bd2e7-f5c2-a7f2-fbaa-0d1cdc32f81b"}
	inv := ExampleGPU("dra-example-driver-cluster-worker", ExampleGPUOptions{GPUs: 8})
	var got []string
	for _, d := range inv.Slices[0].Spec.Devices {
		got = append(got, *d.Attributes["uuid"].StringValue)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("uuids\n got  %v\n want %v", got, want)
	}
}
