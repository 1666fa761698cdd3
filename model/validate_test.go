package model

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// validPool is a partitionable GPU pool published correctly: a counters
// slice and a devices slice (two halves and the whole GPU), plus a
// multi-host pool whose devices share per-node counters.
const validPool = `apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-counters}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0
    counters:
      memory: {value: 40Gi}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-devices}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 2}
  devices:
  - name: whole
    attributes:
      profile: {string: full}
    consumesCounters:
    - counterSet: gpu-0
      counters: {memory: {value: 40Gi}}
      compatibilityGroups: [full]
  - name: half-0
    attributes:
      profile: {string: half}
    consumesCounters:
    - counterSet: gpu-0
      counters: {memory: {value: 20Gi}}
      compatibilityGroups: [split]
  - name: half-1
    consumesCounters:
    - counterSet: gpu-0
      counters: {memory: {value: 20Gi}}
      compatibilityGroups: [split]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: tpu-counters}
spec:
  driver: tpu.example.com
  allNodes: true
  pool: {name: tpus, generation: 3, resourceSliceCount: 2}
  sharedCounters:
  - name: hosts
    counters:
      n1: {value: "4"}
      n2: {value: "4"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: tpu-devices}
spec:
  driver: tpu.example.com
  perDeviceNodeSelection: true
  pool: {name: tpus, generation: 3, resourceSliceCount: 2}
  devices:
  - name: tpu-1
    nodeName: n1
    consumesCounters:
    - counterSet: hosts
      counters: {n1: {value: "4"}}
  - name: tpu-2
    nodeName: n2
    consumesCounters:
    - counterSet: hosts
      counters: {n2: {value: "4"}}
  - name: tpu-12
    nodeSelector:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [n1, n2]}
    consumesCounters:
    - counterSet: hosts
      counters: {n1: {value: "4"}, n2: {value: "4"}}
`

func loadValid(t *testing.T) *input.Objects {
	t.Helper()
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(validPool))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func slice(objs *input.Objects, name string) *resourceapi.ResourceSlice {
	for _, s := range objs.Slices {
		if s.Name == name {
			return s
		}
	}
	panic("no slice " + name)
}

func device(objs *input.Objects, sliceName, dev string) *resourceapi.Device {
	s := slice(objs, sliceName)
	for i := range s.Spec.Devices {
		if s.Spec.Devices[i].Name == dev {
			return &s.Spec.Devices[i]
		}
	}
	panic("no device " + dev)
}

func counters(kv ...string) map[string]resourceapi.Counter {
	m := map[string]resourceapi.Counter{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = resourceapi.Counter{Value: resource.MustParse(kv[i+1])}
	}
	return m
}

func TestValidateExamplesPoolClean(t *testing.T) {
	fs, err := Validate(context.Background(), loadValid(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 0 {
		t.Fatalf("valid pool has findings: %v", fs)
	}
}

// TestValidateFindings breaks the valid pool in one way per case and wants
// exactly the finding for it: severity, origin, slice, device, field and
// message.
func TestValidateFindings(t *testing.T) {
	manyDevices := func(n int, consume bool) func(*input.Objects) {
		return func(o *input.Objects) {
			s := slice(o, "gpu-devices")
			s.Spec.Devices = nil
			for i := 0; i < n; i++ {
				d := resourceapi.Device{Name: fmt.Sprintf("d-%d", i)}
				if consume {
					d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: counters("memory", "1Gi")}}
				}
				s.Spec.Devices = append(s.Spec.Devices, d)
			}
		}
	}
	tests := []struct {
		name   string
		mutate func(*input.Objects)
		want   Finding // Message is a substring
	}{
		{"too many devices", manyDevices(129, false),
			Finding{Severity: "error", Slice: "gpu-devices", Field: "spec.devices", Message: "129 devices, more than 128"}},
		{"too many devices with counters", manyDevices(65, true),
			Finding{Severity: "error", Slice: "gpu-devices", Field: "spec.devices", Message: "65 devices, more than 64 (the limit when any device has taints, consumes counters"}},
		{"too many counter sets", func(o *input.Objects) {
			s := slice(o, "gpu-counters")
			for i := 1; i <= 8; i++ {
				s.Spec.SharedCounters = append(s.Spec.SharedCounters, resourceapi.CounterSet{Name: fmt.Sprintf("gpu-%d", i), Counters: counters("memory", "1")})
			}
		}, Finding{Severity: "error", Slice: "gpu-counters", Field: "spec.sharedCounters", Message: "9 counter sets, more than 8"}},
		{"too many counters", func(o *input.Objects) {
			cs := slice(o, "gpu-counters").Spec.SharedCounters[0].Counters
			for i := 0; i < 32; i++ {
				cs[fmt.Sprintf("c-%d", i)] = resourceapi.Counter{Value: resource.MustParse("1")}
			}
		}, Finding{Severity: "error", Slice: "gpu-counters", Field: "spec.sharedCounters[0].counters", Message: "33 counters, more than 32"}},
		{"too many consumed counter sets", func(o *input.Objects) {
			d := device(o, "gpu-devices", "whole")
			for _, n := range []string{"x", "y"} {
				d.ConsumesCounters = append(d.ConsumesCounters, resourceapi.DeviceCounterConsumption{CounterSet: n, Counters: counters("memory", "1")})
			}
		}, Finding{Severity: "error", Slice: "gpu-devices", Device: "whole", Field: "spec.devices[0].consumesCounters", Message: "3 entries, more than 2"}},
		{"too many compatibility groups", func(o *input.Objects) {
			device(o, "gpu-devices", "whole").ConsumesCounters[0].CompatibilityGroups = []string{"a", "b", "c"}
		}, Finding{Severity: "error", Slice: "gpu-devices", Device: "whole", Field: "spec.devices[0].consumesCounters[0].compatibilityGroups", Message: "3 groups, more than 2"}},
		{"duplicate compatibility group", func(o *input.Objects) {
			device(o, "gpu-devices", "whole").ConsumesCounters[0].CompatibilityGroups = []string{"a", "a"}
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0].consumesCounters[0].compatibilityGroups[1]", Message: `group "a" is listed twice`}},
		{"too many attributes", func(o *input.Objects) {
			d := device(o, "gpu-devices", "whole")
			for i := 0; i < 32; i++ {
				d.Attributes[resourceapi.QualifiedName(fmt.Sprintf("a%d", i))] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(i))}
			}
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0]", Message: "33 attributes and capacities, more than 32"}},
		{"attribute with two values", func(o *input.Objects) {
			device(o, "gpu-devices", "whole").Attributes["profile"] = resourceapi.DeviceAttribute{StringValue: ptr.To("x"), IntValue: ptr.To(int64(1))}
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0].attributes[profile]", Message: "exactly one value must be set, found 2"}},
		{"bad version", func(o *input.Objects) {
			device(o, "gpu-devices", "whole").Attributes["driverVersion"] = resourceapi.DeviceAttribute{VersionValue: ptr.To("1.2")}
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0].attributes[driverVersion].version", Message: `"1.2" is not a semantic version`}},
		{"bad attribute name", func(o *input.Objects) {
			device(o, "gpu-devices", "whole").Attributes["gpu.example.com/parent-uuid"] = resourceapi.DeviceAttribute{StringValue: ptr.To("x")}
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0].attributes[gpu.example.com/parent-uuid]", Message: "must be a C identifier"}},
		{"no node selection", func(o *input.Objects) { slice(o, "gpu-counters").Spec.NodeName = nil },
			Finding{Severity: "error", Slice: "gpu-counters", Field: "spec", Message: "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required, none is set"}},
		{"two node selection fields", func(o *input.Objects) { slice(o, "gpu-counters").Spec.AllNodes = ptr.To(true) },
			Finding{Severity: "error", Slice: "gpu-counters", Field: "spec", Message: "but nodeName, allNodes are set"}},
		{"allNodes false", func(o *input.Objects) { slice(o, "tpu-counters").Spec.AllNodes = ptr.To(false) },
			Finding{Severity: "error", Slice: "tpu-counters", Field: "spec.allNodes", Message: "must be unset or true"}},
		{"node selector with two terms", func(o *input.Objects) {
			s := slice(o, "gpu-counters")
			s.Spec.NodeName = nil
			s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}, {}}}
		}, Finding{Severity: "error", Slice: "gpu-counters", Field: "spec.nodeSelector.nodeSelectorTerms", Message: "must have exactly one node selector term"}},
		{"device node selection without perDeviceNodeSelection", func(o *input.Objects) {
			device(o, "gpu-devices", "half-0").NodeName = ptr.To("n1")
		}, Finding{Severity: "error", Device: "half-0", Field: "spec.devices[1]", Message: "can only be set on a device when the slice sets perDeviceNodeSelection"}},
		{"per-device node selection missing", func(o *input.Objects) {
			device(o, "tpu-devices", "tpu-1").NodeName = nil
		}, Finding{Severity: "error", Device: "tpu-1", Field: "spec.devices[0]", Message: "exactly one of nodeName, nodeSelector, allNodes is required because the slice sets perDeviceNodeSelection"}},
		{"counters and devices in one slice", func(o *input.Objects) {
			slice(o, "gpu-devices").Spec.SharedCounters = []resourceapi.CounterSet{{Name: "extra", Counters: counters("x", "1")}}
		}, Finding{Severity: "error", Slice: "gpu-devices", Field: "spec", Message: "sharedCounters and devices are both set"}},
		{"incomplete pool", func(o *input.Objects) {
			o.Slices = append(o.Slices[:1:1], o.Slices[2:]...) // drop gpu-devices
		}, Finding{Severity: "error", Pool: "gpu.example.com/n1", Field: "spec.pool.resourceSliceCount", Message: "incomplete pool: generation 1 has 1 of 2 slices (gpu-counters)"}},
		{"slice of an older generation", func(o *input.Objects) {
			s := slice(o, "gpu-devices").DeepCopy()
			s.Name = "gpu-devices-old"
			s.Spec.Pool.Generation = 0
			o.Slices = append(o.Slices, s)
			o.Origin["ResourceSlice gpu-devices-old"] = "old.yaml#1"
		}, Finding{Severity: "warning", Origin: "old.yaml#1", Slice: "gpu-devices-old", Field: "spec.pool.generation", Message: "generation 0 is superseded by generation 1"}},
		{"inconsistent slice count", func(o *input.Objects) {
			slice(o, "gpu-devices").Spec.Pool.ResourceSliceCount = 3
		}, Finding{Severity: "error", Slice: "gpu-devices", Field: "spec.pool.resourceSliceCount", Message: "3, but slice gpu-counters of the same generation says 2"}},
		{"duplicate device in one slice", func(o *input.Objects) {
			device(o, "gpu-devices", "half-1").Name = "half-0"
		}, Finding{Severity: "error", Slice: "gpu-devices", Device: "half-0", Field: "spec.devices[2].name", Message: `device name "half-0" is also used by spec.devices[1]`}},
		{"duplicate device across slices", func(o *input.Objects) {
			device(o, "tpu-devices", "tpu-2").Name = "tpu-x"
			s := slice(o, "tpu-counters")
			s.Spec.SharedCounters = nil
			s.Spec.Devices = []resourceapi.Device{{Name: "tpu-x"}}
			slice(o, "tpu-devices").Spec.SharedCounters = nil
			// keep the counters in a third slice
			o.Slices = append(o.Slices, &resourceapi.ResourceSlice{})
			*o.Slices[len(o.Slices)-1] = *slice(o, "tpu-counters").DeepCopy()
			o.Slices[len(o.Slices)-1].Name = "tpu-counters-2"
			o.Slices[len(o.Slices)-1].Spec.Devices = nil
			o.Slices[len(o.Slices)-1].Spec.SharedCounters = []resourceapi.CounterSet{{Name: "hosts", Counters: counters("n1", "4", "n2", "4")}}
			for _, x := range []string{"tpu-counters", "tpu-devices", "tpu-counters-2"} {
				slice(o, x).Spec.Pool.ResourceSliceCount = 3
			}
		}, Finding{Severity: "error", Slice: "tpu-devices", Device: "tpu-x", Field: "spec.devices[1].name", Message: `device name "tpu-x" is also used in slice tpu-counters`}},
		{"duplicate counter set across slices", func(o *input.Objects) {
			slice(o, "gpu-devices").Spec.Pool.ResourceSliceCount = 3
			slice(o, "gpu-counters").Spec.Pool.ResourceSliceCount = 3
			s := slice(o, "gpu-counters").DeepCopy()
			s.Name = "gpu-counters-2"
			o.Slices = append(o.Slices, s)
			o.Origin["ResourceSlice gpu-counters-2"] = "more.yaml#1"
		}, Finding{Severity: "error", Slice: "gpu-counters-2", Field: "spec.sharedCounters[0].name", Message: `counter set "gpu-0" is also defined in slice gpu-counters`}},
		{"missing counter set", func(o *input.Objects) {
			device(o, "gpu-devices", "half-1").ConsumesCounters[0].CounterSet = "gpu-1"
		}, Finding{Severity: "error", Slice: "gpu-devices", Device: "half-1", Field: "spec.devices[2].consumesCounters[0].counterSet", Message: `counter set "gpu-1" does not exist in pool gpu.example.com/n1`}},
		{"missing counter", func(o *input.Objects) {
			device(o, "gpu-devices", "half-1").ConsumesCounters[0].Counters = counters("memry", "20Gi")
		}, Finding{Severity: "error", Device: "half-1", Field: "spec.devices[2].consumesCounters[0].counters[memry]", Message: `counter "memry" does not exist in counter set "gpu-0" (slice gpu-counters)`}},
		{"device can never be allocated", func(o *input.Objects) {
			device(o, "gpu-devices", "whole").ConsumesCounters[0].Counters = counters("memory", "48Gi")
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0].consumesCounters[0].counters[memory]", Message: `consumes 48Gi of counter "memory", but counter set "gpu-0" only has 40Gi: the device can never be allocated`}},
		{"overlap without shared counter", func(o *input.Objects) {
			device(o, "tpu-devices", "tpu-12").ConsumesCounters[0].Counters = counters("n2", "4")
		}, Finding{Severity: "error", Slice: "tpu-devices", Device: "tpu-12", Field: "spec.devices[2].consumesCounters", Message: "overlaps device tpu-1 (slice tpu-devices) on node n1, but the two share no counter"}},
		{"negative counter", func(o *input.Objects) {
			slice(o, "gpu-counters").Spec.SharedCounters[0].Counters = counters("memory", "-1")
		}, Finding{Severity: "error", Slice: "gpu-counters", Field: "spec.sharedCounters[0].counters[memory].value", Message: "-1 is negative"}},
		{"request policy on an exclusive device", func(o *input.Objects) {
			device(o, "gpu-devices", "whole").Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("40Gi"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("1Gi"))}}}
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0].capacity[memory].requestPolicy", Message: "forbidden: allowMultipleAllocations must be true"}},
		{"request policy default not a valid value", func(o *input.Objects) {
			d := device(o, "gpu-devices", "whole")
			d.AllowMultipleAllocations = ptr.To(true)
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("40Gi"), RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("1Gi")),
					ValidValues: []resource.Quantity{resource.MustParse("10Gi"), resource.MustParse("20Gi")}}}}
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0].capacity[memory].requestPolicy.validValues", Message: "the default 1Gi is not one of the valid values"}},
		{"bad device name", func(o *input.Objects) { device(o, "gpu-devices", "whole").Name = "Whole_GPU" },
			Finding{Severity: "error", Device: "Whole_GPU", Field: "spec.devices[0].name", Message: "is not a DNS label"}},
		{"bad counter set name", func(o *input.Objects) { slice(o, "gpu-counters").Spec.SharedCounters[0].Name = "gpu.0" },
			Finding{Severity: "error", Slice: "gpu-counters", Field: "spec.sharedCounters[0].name", Message: `"gpu.0" is not a DNS label`}},
		{"bad slice count", func(o *input.Objects) {
			for _, n := range []string{"gpu-counters", "gpu-devices"} {
				slice(o, n).Spec.Pool.ResourceSliceCount = 0
			}
		}, Finding{Severity: "error", Slice: "gpu-counters", Field: "spec.pool.resourceSliceCount", Message: "0: must be greater than zero"}},
		{"missing driver", func(o *input.Objects) { slice(o, "gpu-counters").Spec.Driver = "" },
			Finding{Severity: "error", Slice: "gpu-counters", Field: "spec.driver", Message: "required"}},
		{"too many taints", func(o *input.Objects) {
			d := device(o, "gpu-devices", "whole")
			for i := 0; i < 17; i++ {
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: fmt.Sprintf("k%d", i), Effect: resourceapi.DeviceTaintEffectNoSchedule})
			}
		}, Finding{Severity: "error", Device: "whole", Field: "spec.devices[0].taints", Message: "17 taints, more than 16"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := loadValid(t)
			tc.mutate(objs)
			fs, err := Validate(context.Background(), objs)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if matches(f, tc.want) {
					if f.Origin == "" {
						t.Errorf("finding names no file: %v", f)
					}
					return
				}
			}
			t.Fatalf("want a finding like %+v, got:\n%s", tc.want, findingsText(fs))
		})
	}
}

func matches(f, want Finding) bool {
	return f.Severity == want.Severity &&
		(want.Origin == "" || f.Origin == want.Origin) &&
		(want.Slice == "" || f.Slice == want.Slice) &&
		(want.Pool == "" || f.Pool == want.Pool) &&
		(want.Device == "" || f.Device == want.Device) &&
		f.Field == want.Field &&
		strings.Contains(f.Message, want.Message)
}

func findingsText(fs []Finding) string {
	var sb strings.Builder
	for _, f := range fs {
		sb.WriteString("  " + f.String() + "\n")
	}
	return sb.String()
}

func TestValidateFindingString(t *testing.T) {
	f := Finding{Severity: "error", Origin: "s.yaml#2", Slice: "gpu-devices", Device: "whole", Field: "spec.devices[0].name", Message: "bad"}
	if got, want := f.String(), "error: s.yaml#2: ResourceSlice gpu-devices: device whole: field spec.devices[0].name: bad"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestValidateCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Validate(ctx, loadValid(t)); err == nil {
		t.Fatal("want an error from a canceled context")
	}
}

func TestCheckLimits(t *testing.T) {
	objs := loadValid(t)
	if err := input.CheckLimits(objs); err != nil {
		t.Fatal(err)
	}
	s := slice(objs, "gpu-devices")
	for n := len(s.Spec.Devices); n <= input.MaxDevices; n += len(s.Spec.Devices) {
		objs.Slices = append(objs.Slices, s)
	}
	err := input.CheckLimits(objs)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than drasat's limit of %d", input.MaxDevices)) {
		t.Fatalf("CheckLimits = %v, want the device limit", err)
	}
	objs = loadValid(t)
	objs.Claims = make([]*resourceapi.ResourceClaim, input.MaxClaims+1)
	if err := input.CheckLimits(objs); err == nil || !strings.Contains(err.Error(), "ResourceClaims") {
		t.Fatalf("CheckLimits = %v, want the claim limit", err)
	}
}
