package driverprofile

import (
	"fmt"
	"math/rand"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// The drivers of kubernetes-sigs/dra-example-driver v0.4.0: one binary,
// its --device-profile picks gpu (driver gpu.example.com) or net
// (net.example.com); the driver name is <profile>.example.com
// (cmd/dra-example-kubeletplugin/main.go).
const (
	ExampleGPUDriver = "gpu.example.com"
	ExampleNetDriver = "net.example.com"
)

// ExampleClass is the example driver's one DeviceClass, named after the
// driver and selecting all its devices
// (deployments/helm/dra-example-driver/templates/deviceclass.yaml, v0.4.0).
func ExampleClass(driver string) *resourceapi.DeviceClass {
	return deviceClass(driver, fmt.Sprintf("device.driver == '%s'", driver))
}

// ExampleGPUOptions are the kubelet plugin's flags for the gpu profile.
type ExampleGPUOptions struct {
	GPUs int // --num-devices, default 8
	// Partitions is --gpu-partitions: above 0, every GPU has a counter set
	// and publishes that many equal partitions plus a full device drawing
	// from it (DRAPartitionableDevices).
	Partitions int
	// AllowMultiple is --gpu-allow-multiple-allocations: devices are shared
	// by consumable capacity (DRAConsumableCapacity), with memory in 1Gi
	// steps and compute in steps of 1.
	AllowMultiple bool
}

// ExampleGPU is a node of the example driver's gpu profile
// (internal/profiles/gpu/gpu.go, EnumerateDevices, v0.4.0). Every GPU has
// 80Gi of memory and 100 compute; attributes index, uuid, model
// LATEST-GPU-MODEL, driverVersion 1.0.0. Without partitions: devices
// gpu-<i> in one slice. With partitions: one slice of counter sets
// gpu-<i>-counters (memory, compute), then one slice with, per GPU, its
// partitions gpu-<i>-partition-<j> (memory and compute divided evenly,
// attributes partition and partitionable) and gpu-<i>-full (partitionable,
// full). Every device states allowMultipleAllocations, true or false.
func ExampleGPU(node string, o ExampleGPUOptions) Inventory {
	uuids := exampleUUIDs(node, "gpu", o.GPUs)
	memory, compute := resource.MustParse("80Gi"), resource.MustParse("100")
	var partMemory, partCompute resource.Quantity
	if o.Partitions > 0 {
		partMemory = *resource.NewQuantity(memory.Value()/int64(o.Partitions), resource.BinarySI)
		partCompute = *resource.NewQuantity(compute.Value()/int64(o.Partitions), resource.DecimalSI)
	}
	caps := func(m, c resource.Quantity) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
		out := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: m}, "compute": {Value: c}}
		if o.AllowMultiple {
			out["memory"] = resourceapi.DeviceCapacity{Value: m, RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(m),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1Gi")), Step: ptr.To(resource.MustParse("1Gi")), Max: ptr.To(m)}}}
			out["compute"] = resourceapi.DeviceCapacity{Value: c, RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(c),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("1")), Step: ptr.To(resource.MustParse("1")), Max: ptr.To(c)}}}
		}
		return out
	}
	var devices []resourceapi.Device
	var sets []resourceapi.CounterSet
	for i, uuid := range uuids {
		attrs := func() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
			return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))}, "uuid": str(uuid),
				"model": str("LATEST-GPU-MODEL"), "driverVersion": ver("1.0.0"),
			}
		}
		if o.Partitions == 0 {
			devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: attrs(),
				AllowMultipleAllocations: ptr.To(o.AllowMultiple), Capacity: caps(memory, compute)})
			continue
		}
		set := fmt.Sprintf("gpu-%d-counters", i)
		sets = append(sets, resourceapi.CounterSet{Name: set, Counters: map[string]resourceapi.Counter{"memory": {Value: memory}, "compute": {Value: compute}}})
		consumes := func(m, c resource.Quantity) []resourceapi.DeviceCounterConsumption {
			return []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: map[string]resourceapi.Counter{"memory": {Value: m}, "compute": {Value: c}}}}
		}
		for j := 0; j < o.Partitions; j++ {
			a := attrs()
			a["partition"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(j))}
			a["partitionable"] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
			devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d-partition-%d", i, j), Attributes: a,
				AllowMultipleAllocations: ptr.To(o.AllowMultiple), Capacity: caps(partMemory, partCompute), ConsumesCounters: consumes(partMemory, partCompute)})
		}
		a := attrs()
		a["partitionable"] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
		a["full"] = resourceapi.DeviceAttribute{BoolValue: ptr.To(true)}
		devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d-full", i), Attributes: a,
			AllowMultipleAllocations: ptr.To(o.AllowMultiple), Capacity: caps(memory, compute), ConsumesCounters: consumes(memory, compute)})
	}
	inv := Inventory{Classes: []*resourceapi.DeviceClass{ExampleClass(ExampleGPUDriver)}}
	if len(sets) == 0 {
		s := newSlice(ExampleGPUDriver, node, 0, 1)
		s.Spec.Devices = devices
		inv.Slices = append(inv.Slices, s)
		return inv
	}
	counters, devs := newSlice(ExampleGPUDriver, node, 0, 2), newSlice(ExampleGPUDriver, node, 1, 2)
	counters.Spec.SharedCounters, devs.Spec.Devices = sets, devices
	inv.Slices = append(inv.Slices, counters, devs)
	return inv
}

// ExampleNet is a node of the example driver's net profile
// (internal/profiles/net/net.go, EnumerateDevices, v0.4.0): nics NICs
// nic-<i>, each shared (allowMultipleAllocations) by ingressBandwidth and
// egressBandwidth (100G, default 1G, from 100M in 1M steps) and vfs (100,
// always 1), with attributes index, uuid, model LATEST-NET-MODEL and
// driverVersion 1.0.0. It publishes no PCI attribute.
func ExampleNet(node string, nics int) Inventory {
	bw := resourceapi.DeviceCapacity{Value: resource.MustParse("100G"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
		Default: ptr.To(resource.MustParse("1G")),
		ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("100M")), Max: ptr.To(resource.MustParse("100G")),
			Step: ptr.To(resource.MustParse("1M"))}}}
	s := newSlice(ExampleNetDriver, node, 0, 1)
	for i, uuid := range exampleUUIDs(node, "net", nics) {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("nic-%d", i), AllowMultipleAllocations: ptr.To(true),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))}, "uuid": str(uuid),
				"model": str("LATEST-NET-MODEL"), "driverVersion": ver("1.0.0"),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"vfs": {Value: resource.MustParse("100"), RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default: ptr.To(resource.MustParse("1")), ValidValues: []resource.Quantity{resource.MustParse("1")}}},
				"ingressBandwidth": bw, "egressBandwidth": bw,
			}})
	}
	return Inventory{Slices: []*resourceapi.ResourceSlice{s}, Classes: []*resourceapi.DeviceClass{ExampleClass(ExampleNetDriver)}}
}

// exampleUUIDs are the example driver's UUIDs: 16 bytes per device from
// math/rand seeded with a 31-multiplier hash of the node name, printed as
// a UUID after "<prefix>-" (internal/profiles/helpers/uid_tool.go and
// gpu.go generateUUIDs, v0.4.0). They depend on the node name only.
func exampleUUIDs(node, prefix string, n int) []string {
	seed := int64(0)
	for _, c := range node {
		seed = 31*seed + int64(c)
	}
	rng := rand.New(rand.NewSource(seed))
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 16)
		rng.Read(b)
		out[i] = fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	return out
}
