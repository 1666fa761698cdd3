package driverprofile

import "fmt"

// Profile is one (driver, version, device model) and how a node of it is
// published.
type Profile struct {
	Name string // "nvidia-v25.12.0-a100-40gb"
	// Source is where the facts come from: repository, version, files.
	Source string
	// Node is what a node with n devices (GPUs or NICs) publishes.
	Node func(node string, n int) Inventory
	// Ours marks a shape no driver publishes.
	Ours bool
}

const (
	nvidiaSource  = "NVIDIA/k8s-dra-driver-gpu %s, cmd/gpu-kubelet-plugin (driver.go, partitions.go, mig.go, deviceinfo.go, nvlib.go) and deployments/helm/*/templates/deviceclass-*.yaml"
	exampleSource = "kubernetes-sigs/dra-example-driver v0.4.0, internal/profiles/%s/%s.go and deployments/helm/dra-example-driver/templates/deviceclass.yaml"
)

// Profiles lists every profile, in a fixed order.
func Profiles() []Profile {
	var out []Profile
	for _, v := range []NVIDIAVersion{NVIDIAv040, NVIDIAv25120} {
		for _, gm := range GPUModels {
			v, gm := v, gm
			out = append(out, Profile{Name: "nvidia-" + string(v) + "-mig-" + gm.Key, Source: fmt.Sprintf(nvidiaSource, v),
				Node: func(node string, n int) Inventory { return NVIDIADynamicMIG(v, gm, node, n) }})
		}
	}
	for _, gm := range GPUModels {
		gm := gm
		out = append(out, Profile{Name: "nvidia-v25.12.0-nomig-" + gm.Key, Source: fmt.Sprintf(nvidiaSource, NVIDIAv25120),
			Node: func(node string, n int) Inventory { return NVIDIAWholeGPUs(NVIDIAv25120, gm, node, n) }})
	}
	out = append(out,
		Profile{Name: "example-v0.4.0-gpu", Source: fmt.Sprintf(exampleSource, "gpu", "gpu"),
			Node: func(node string, n int) Inventory { return ExampleGPU(node, ExampleGPUOptions{GPUs: n}) }},
		Profile{Name: "example-v0.4.0-gpu-partitions", Source: fmt.Sprintf(exampleSource, "gpu", "gpu") + " (--gpu-partitions=4)",
			Node: func(node string, n int) Inventory { return ExampleGPU(node, ExampleGPUOptions{GPUs: n, Partitions: 4}) }},
		Profile{Name: "example-v0.4.0-gpu-shared", Source: fmt.Sprintf(exampleSource, "gpu", "gpu") + " (--gpu-allow-multiple-allocations)",
			Node: func(node string, n int) Inventory {
				return ExampleGPU(node, ExampleGPUOptions{GPUs: n, AllowMultiple: true})
			}},
		Profile{Name: "example-v0.4.0-net", Source: fmt.Sprintf(exampleSource, "net", "net"),
			Node: func(node string, n int) Inventory { return ExampleNet(node, n) }},
		Profile{Name: "ours-nic-pcieroot", Source: "ours (no NIC driver publishing pcieRoot could be read); attribute names from k8s.io/dynamic-resource-allocation v0.37 deviceattribute", Ours: true,
			Node: func(node string, n int) Inventory { return NICs(node, n) }},
	)
	return out
}
