package driverprofile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// exampleFiles are the examples' files that the profiles write: each
// example's classes and slices come from here, never by hand. The test
// fails when a file differs from its profile; go test ./driverprofile
// -update rewrites them.
func exampleFiles() map[string]func() (Inventory, string) {
	nodes := func(names []string, node func(string) Inventory) Inventory {
		var inv Inventory
		for _, n := range names {
			one := node(n)
			inv.Slices = append(inv.Slices, one.Slices...)
			inv.Classes = one.Classes
		}
		return inv
	}
	return map[string]func() (Inventory, string){
		"mig-a100": func() (Inventory, string) {
			return nodes([]string{"node-1", "node-2"}, func(n string) Inventory { return NVIDIADynamicMIG(NVIDIAv25120, A100SXM440GB, n, 2) }),
				"Two nodes with two NVIDIA A100-SXM4-40GB each, as NVIDIA/k8s-dra-driver-gpu v25.12.0\n" +
					"publishes them with its DynamicMIG feature gate (profile nvidia-v25.12.0-mig-a100-40gb):\n" +
					"per node a counters slice, then one slice per GPU with the whole GPU and its 25 MIG placements."
		},
		"gpu-nic": func() (Inventory, string) {
			inv := nodes([]string{"node-1", "node-2"}, func(n string) Inventory {
				g, nic := NVIDIAWholeGPUs(NVIDIAv25120, H100SXM580GB, n, 8), NICs(n, 4)
				return Inventory{Slices: append(g.Slices, nic.Slices...), Classes: append(g.Classes, nic.Classes...)}
			})
			return inv, "Two nodes with eight NVIDIA H100 80GB HBM3 (NVIDIA/k8s-dra-driver-gpu v25.12.0, no MIG:\n" +
				"profile nvidia-v25.12.0-nomig-h100-80gb) and four NICs of our own shape (profile\n" +
				"ours-nic-pcieroot; no real NIC driver we could read publishes pcieRoot), two GPUs and one NIC\n" +
				"on each of four PCIe roots (our topology)."
		},
		"mixed-versions": func() (Inventory, string) {
			a := NVIDIADynamicMIG(NVIDIAv040, A100SXM440GB, "node-1", 2)
			b := NVIDIADynamicMIG(NVIDIAv25120, A100SXM440GB, "node-2", 2)
			return Inventory{Slices: append(a.Slices, b.Slices...), Classes: a.Classes},
				"The cluster of examples/mig-a100 in the middle of an upgrade: node-1 still on\n" +
					"NVIDIA/k8s-dra-driver-gpu v0.4.0 (a MIG-mode A100 publishes no whole GPU; MIG devices carry\n" +
					"pcieRoot), node-2 on v25.12.0 (whole GPU and MIG placements)."
		},
	}
}

func TestExamplesFromProfiles(t *testing.T) {
	for dir, build := range exampleFiles() {
		inv, header := build()
		classes, err := Inventory{Classes: inv.Classes}.YAML("DeviceClasses of the drivers below. Generated from driverprofile\n(go test ./driverprofile -update); do not edit.")
		if err != nil {
			t.Fatal(err)
		}
		slices, err := Inventory{Slices: inv.Slices}.YAML(header + "\nGenerated from driverprofile (go test ./driverprofile -update); do not edit.")
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string][]byte{"10-classes.yaml": classes, "20-slices.yaml": slices} {
			path := filepath.Join("..", "examples", dir, name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is not what driverprofile publishes (go test ./driverprofile -update)", path)
			}
		}
	}
}
