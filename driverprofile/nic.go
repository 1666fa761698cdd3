package driverprofile

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// NICDriver is our own NIC driver shape. No NIC driver we could read
// publishes resource.kubernetes.io/pcieRoot (dra-example-driver's net
// profile publishes no PCI attribute), so this shape is ours: it follows
// the DRA documentation's GPU+NIC example, where a claim aligns a GPU and
// a NIC with matchAttribute on resource.kubernetes.io/pcieRoot, and the
// attribute names and value forms of k8s.io/dynamic-resource-allocation's
// deviceattribute package (v0.37): pciBusID "0000:0c:00.0", pcieRoot
// "pci0000:00".
const NICDriver = "nic.example.com"

// NICBandwidth is what one NIC carries; a GPU's share is NICShare, so
// the two GPUs under one PCIe root share its NIC.
var (
	NICBandwidth = resource.MustParse("200G")
	NICShare     = resource.MustParse("100G")
)

// NICClass selects the NICs.
func NICClass() *resourceapi.DeviceClass {
	return deviceClass(NICDriver, fmt.Sprintf("device.driver == '%s'", NICDriver))
}

// nicPCI puts NIC i on PCIe root i (mod 4), beside GPUs 2i and 2i+1
// (gpuPCI); our topology, as gpuPCI's.
func nicPCI(i int) (busID, root string) {
	base := (i%4)*0x40 + (i/4)*0x10
	return fmt.Sprintf("0000:%02x:00.0", base+0x0c), fmt.Sprintf("pci0000:%02x", base)
}

// NICs is a node of nics NICs of our shape: devices nic-<i> in one slice,
// each with its pciBusID and pcieRoot, shared by bandwidth
// (allowMultipleAllocations; 200G, requested in 10G steps, 100G by default).
func NICs(node string, nics int) Inventory {
	s := newSlice(NICDriver, node, 0, 1)
	for i := 0; i < nics; i++ {
		bus, root := nicPCI(i)
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("nic-%d", i), AllowMultipleAllocations: ptr.To(true),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				PCIBusIDAttr: str(bus), PCIeRootAttr: str(root), "rdma": {BoolValue: ptr.To(true)},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bandwidth": {Value: NICBandwidth,
				RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(NICShare),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(resource.MustParse("10G")), Step: ptr.To(resource.MustParse("10G"))}}}},
		})
	}
	return Inventory{Slices: []*resourceapi.ResourceSlice{s}, Classes: []*resourceapi.DeviceClass{NICClass()}}
}
