package driverprofile

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// UserClaim is a claim as the drivers' users write it, with where it was
// taken from.
type UserClaim struct {
	Claim  *resourceapi.ResourceClaim
	Source string
}

// Request builds one exact request.
func Request(name, class string, count int64, cel ...string) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
	for _, e := range cel {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return r
}

// Claim builds a claim in namespace default.
func Claim(name string, reqs []resourceapi.DeviceRequest, constraints ...resourceapi.DeviceConstraint) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs, Constraints: constraints}},
	}
}

// Match is a matchAttribute constraint over the named requests (all when none).
func Match(attr string, requests ...string) resourceapi.DeviceConstraint {
	return resourceapi.DeviceConstraint{Requests: requests, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(attr))}
}

// ProfileIs selects a MIG profile by name, as the driver's demo specs do.
func ProfileIs(profile string) string {
	return fmt.Sprintf("device.attributes['gpu.nvidia.com'].profile == '%s'", profile)
}

// ProductIs selects a GPU model by its productName.
func ProductIs(product string) string {
	return fmt.Sprintf("device.attributes['gpu.nvidia.com'].productName == '%s'", product)
}

// WithCapacity asks for amounts of a shared device's capacities.
func WithCapacity(r resourceapi.DeviceRequest, amounts map[string]string) resourceapi.DeviceRequest {
	r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
	for k, v := range amounts {
		r.Exactly.Capacity.Requests[resourceapi.QualifiedName(k)] = resource.MustParse(v)
	}
	return r
}

const (
	nv      = "NVIDIA/k8s-dra-driver-gpu v0.4.0, "
	ex      = "kubernetes-sigs/dra-example-driver v0.4.0, demo/examples/"
	draDocs = "the Kubernetes DRA documentation's GPU+NIC alignment (matchAttribute on resource.kubernetes.io/pcieRoot), with our NIC shape"
)

// UserClaims are the claims the drivers' documentation and demo specs
// write, one each, in a fixed order.
func UserClaims() []UserClaim {
	mig := "mig.nvidia.com"
	return []UserClaim{
		{Claim("single-gpu", []resourceapi.DeviceRequest{Request("gpu", "gpu.nvidia.com", 1)}),
			nv + "demo/specs/quickstart/v1/gpu-test1.yaml (a whole GPU by class)"},
		{Claim("mig-devices", []resourceapi.DeviceRequest{
			Request("mig-1g-5gb-0", mig, 1, ProfileIs("1g.5gb")), Request("mig-1g-5gb-1", mig, 1, ProfileIs("1g.5gb")),
			Request("mig-2g-10gb", mig, 1, ProfileIs("2g.10gb")), Request("mig-3g-20gb", mig, 1, ProfileIs("3g.20gb"))},
			Match("gpu.nvidia.com/parentUUID")),
			nv + "demo/specs/quickstart/v1/gpu-test4.yaml (MIG devices by profile, on one GPU)"},
		{Claim("mig1g", []resourceapi.DeviceRequest{Request("mig1g", mig, 1,
			"device.capacity['gpu.nvidia.com'].multiprocessors.isGreaterThan(quantity(\"10\"))\n&&\ndevice.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity(\"10Gi\"))")}),
			nv + "tests/bats/specs/gpu-simple-mig.yaml (a MIG device by capacity)"},
		{Claim("migdevs", []resourceapi.DeviceRequest{
			Request("mig1", mig, 1, "device.capacity['gpu.nvidia.com'].multiprocessors.isLessThan(quantity(\"30\"))"),
			Request("mig2", mig, 1, "device.capacity['gpu.nvidia.com'].multiprocessors.isGreaterThan(quantity(\"50\"))")}),
			nv + "tests/bats/specs/gpu-multiple-mig.yaml (two MIG devices by capacity)"},
		{Claim("a100-by-product", []resourceapi.DeviceRequest{Request("gpu", "gpu.nvidia.com", 1, ProductIs("NVIDIA A100-SXM4-40GB"))}),
			nv + "tests/bats/specs/gpu-cel-nomatch.yaml's productName selector, with a real product name"},
		{Claim("a100-by-index", []resourceapi.DeviceRequest{Request("gpu", "gpu.nvidia.com", 1,
			"device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')\n&&\n(device.attributes['gpu.nvidia.com'].index == 0 ||\ndevice.attributes['gpu.nvidia.com'].index == 2 ||\ndevice.attributes['gpu.nvidia.com'].index == 4 ||\ndevice.attributes['gpu.nvidia.com'].index == 6)")}),
			nv + "demo/specs/quickstart/v1/gpu-test6.yaml (selects on index, which the driver no longer publishes)"},
		{Claim("gpu-nic", []resourceapi.DeviceRequest{Request("gpu", "gpu.nvidia.com", 1), Request("nic", NICDriver, 1)},
			Match(PCIeRootAttr)), draDocs},
		{Claim("mig-nic", []resourceapi.DeviceRequest{Request("mig", mig, 1), Request("nic", NICDriver, 1)},
			Match(PCIeRootAttr)), draDocs + ", a MIG device instead of a whole GPU"},
		{Claim("example-gpu", []resourceapi.DeviceRequest{Request("gpu", ExampleGPUDriver, 1)}),
			ex + "basic-resourceclaimtemplate/basic-resourceclaimtemplate.yaml"},
		{Claim("example-gpu-partitions", []resourceapi.DeviceRequest{Request("gpu-partition", ExampleGPUDriver, 2)}),
			ex + "partitionable-devices/partitionable-devices.yaml"},
		{Claim("example-gpu-share", []resourceapi.DeviceRequest{WithCapacity(Request("gpu", ExampleGPUDriver, 1), map[string]string{"memory": "8Gi", "compute": "10"})}),
			ex + "gpu-allow-multiple-allocations-partitionable/gpu-allow-multiple-allocations-partitionable.yaml"},
		{Claim("example-nic", []resourceapi.DeviceRequest{WithCapacity(Request("nic", ExampleNetDriver, 1), map[string]string{"ingressBandwidth": "10G", "egressBandwidth": "5G"})}),
			ex + "net-consumable-capacity/net-consumable-capacity.yaml"},
	}
}
