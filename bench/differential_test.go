package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// allFeatures is the upstream allocator with every feature drasat has on
// (list-type attributes, derived attributes, compatibility groups, ...).
var allFeatures = structured.Features{
	AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true,
	DeviceBindingAndStatus: true, ConsumableCapacity: true, FractionalCapacityRange: true,
	CompatibilityGroups: true, ListTypeAttributes: true, DerivedAttributes: true, OptionalNodeOperations: true,
}

// diffInstance builds a small random cluster: one or two nodes, each with a
// pool of devices drawing on one counter set (some devices tainted, some
// numa values lists), with two nodes sometimes other generations of a
// pool (older or newer, complete or not, for the other node or all
// nodes), sometimes a pool on all nodes, shared devices with consumable
// capacity, a DeviceTaintRule, an existing allocation; and a few claims
// with selectors, counts, capacity requests, allocationMode All,
// firstAvailable, tolerations and matchAttribute / distinctAttribute on
// scalar and list attributes.
// diffExtend adds the rest (see there), among it selectors that fail at
// run time on some devices.
func diffInstance(seed uint64) (*input.Objects, []*resourceapi.ResourceClaim) {
	rng := rand.New(rand.NewPCG(seed, 37))
	objs := &input.Objects{Classes: []*resourceapi.DeviceClass{upClass()}}
	attr := func(m map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name string, v resourceapi.DeviceAttribute) {
		m[resourceapi.QualifiedName(name)] = v
	}
	device := func(name string) resourceapi.Device {
		d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
		attr(d.Attributes, "size", resourceapi.DeviceAttribute{IntValue: ptr.To(int64(1 + rng.IntN(3)))})
		attr(d.Attributes, "model", resourceapi.DeviceAttribute{StringValue: ptr.To([]string{"a", "b"}[rng.IntN(2)])})
		switch rng.IntN(4) {
		case 0:
			attr(d.Attributes, "numa", resourceapi.DeviceAttribute{IntValue: ptr.To(int64(rng.IntN(3)))})
		case 1, 2:
			// A list of one to three values (an attribute without any
			// value is invalid in the API; CEL fails on such devices).
			vs := []int64{int64(rng.IntN(3))}
			for v := int64(0); v < 3; v++ {
				if v != vs[0] && rng.IntN(2) == 0 {
					vs = append(vs, v)
				}
			}
			attr(d.Attributes, "numa", resourceapi.DeviceAttribute{IntValues: vs})
		}
		if rng.IntN(5) == 0 {
			d.Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
		return d
	}
	nodes := 1 + rng.IntN(2)
	var all []resourceapi.DeviceRequestAllocationResult
	for n := 0; n < nodes; n++ {
		node := fmt.Sprintf("node-%d", n)
		objs.Nodes = append(objs.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		pool := resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, Pool: pool, NodeName: ptr.To(node)}}
		counters := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-counters"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, Pool: pool, NodeName: ptr.To(node),
			SharedCounters: []resourceapi.CounterSet{{Name: "mem", Counters: map[string]resourceapi.Counter{
				"m": {Value: *resource.NewQuantity(int64(3+rng.IntN(5)), resource.DecimalSI)}}}}}}
		partitioned := rng.IntN(2) == 0
		if partitioned {
			s.Spec.Pool.ResourceSliceCount, counters.Spec.Pool.ResourceSliceCount = 2, 2
		}
		for i, k := 0, 2+rng.IntN(4); i < k; i++ {
			d := device(fmt.Sprintf("dev-%d", i))
			if partitioned {
				d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "mem", Counters: map[string]resourceapi.Counter{
					"m": {Value: *resource.NewQuantity(*d.Attributes["size"].IntValue, resource.DecimalSI)}}}}
			}
			s.Spec.Devices = append(s.Spec.Devices, d)
			all = append(all, resourceapi.DeviceRequestAllocationResult{Driver: upDriver, Pool: node, Device: d.Name})
		}
		objs.Slices = append(objs.Slices, s)
		if partitioned {
			objs.Slices = append(objs.Slices, counters)
		}
	}
	// Several generations of a pool, as while a driver moves a pool
	// between nodes: each node uses the generation published for it.
	if nodes == 2 {
		for n := 0; n < nodes; n++ {
			pool, other := fmt.Sprintf("node-%d", n), fmt.Sprintf("node-%d", 1-n)
			generation := func(gen, count int64, node string) {
				s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-gen%d", pool, gen)}, Spec: resourceapi.ResourceSliceSpec{
					Driver: upDriver, Pool: resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count}, NodeName: ptr.To(node)}}
				if rng.IntN(3) == 0 {
					s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
				}
				for i, k := 0, 1+rng.IntN(2); i < k; i++ {
					d := device(fmt.Sprintf("dev-%d", i+rng.IntN(2)*5)) // dev-0/1 also in the other generation
					if len(s.Spec.Devices) > 0 && s.Spec.Devices[0].Name == d.Name {
						continue
					}
					s.Spec.Devices = append(s.Spec.Devices, d)
					all = append(all, resourceapi.DeviceRequestAllocationResult{Driver: upDriver, Pool: pool, Device: d.Name})
				}
				objs.Slices = append(objs.Slices, s)
			}
			for _, s := range objs.Slices {
				if s.Spec.Pool.Name == pool {
					s.Spec.Pool.Generation = 2
				}
			}
			switch rng.IntN(6) {
			case 0: // the older generation, complete, still published for the other node
				generation(1, 1, other)
			case 1: // a newer generation, incomplete, on the other node: All fails there
				generation(3, 2, other)
			case 2: // an older incomplete generation: ignored where it is seen
				generation(1, 2, other)
			case 3: // a newer complete generation on the other node
				generation(3, 1, other)
			}
		}
	}
	// Shared devices with consumable capacity, on all nodes.
	shared := rng.IntN(3) == 0
	if shared {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "nics"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, Pool: resourceapi.ResourcePool{Name: "nics", Generation: 1, ResourceSliceCount: 1}, AllNodes: ptr.To(true)}}
		for i, k := 0, 1+rng.IntN(2); i < k; i++ {
			d := device(fmt.Sprintf("nic-%d", i))
			d.AllowMultipleAllocations = ptr.To(true)
			bw := resourceapi.DeviceCapacity{Value: *resource.NewQuantity(int64(4+rng.IntN(6)), resource.DecimalSI)}
			if rng.IntN(2) == 0 {
				bw.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: resource.NewQuantity(2, resource.DecimalSI),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: resource.NewQuantity(1, resource.DecimalSI), Step: resource.NewQuantity(int64(1+rng.IntN(2)), resource.DecimalSI)}}
			}
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bw": bw}
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
		objs.Slices = append(objs.Slices, s)
	}
	if rng.IntN(3) == 0 {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, Pool: resourceapi.ResourcePool{Name: "shared", Generation: 1, ResourceSliceCount: 1}, AllNodes: ptr.To(true)}}
		for i, k := 0, 1+rng.IntN(3); i < k; i++ {
			s.Spec.Devices = append(s.Spec.Devices, device(fmt.Sprintf("net-%d", i)))
			all = append(all, resourceapi.DeviceRequestAllocationResult{Driver: upDriver, Pool: "shared", Device: s.Spec.Devices[i].Name})
		}
		objs.Slices = append(objs.Slices, s)
	}
	if rng.IntN(3) == 0 {
		pick := all[rng.IntN(len(all))]
		sel := &resourceapi.DeviceTaintSelector{Pool: ptr.To(pick.Pool)}
		if rng.IntN(2) == 0 {
			sel.Device = ptr.To(pick.Device)
		}
		objs.TaintRules = []*resourceapi.DeviceTaintRule{{ObjectMeta: metav1.ObjectMeta{Name: "rule"},
			Spec: resourceapi.DeviceTaintRuleSpec{DeviceSelector: sel, Taint: resourceapi.DeviceTaint{Key: "rule", Effect: resourceapi.DeviceTaintEffectNoExecute}}}}
	}
	if rng.IntN(3) == 0 {
		r := all[rng.IntN(len(all))]
		r.Request = "r"
		c := upClaim("existing", upExact("r", 1, nil))
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}}}
		objs.Claims = append(objs.Claims, c)
	}

	selector := func() []resourceapi.DeviceSelector {
		switch rng.IntN(3) {
		case 0:
			return upSel(fmt.Sprintf(`device.attributes["%s"].size >= %d`, upDriver, 1+rng.IntN(3)))
		case 1:
			return upSel(fmt.Sprintf(`device.attributes["%s"].model == "%s"`, upDriver, []string{"a", "b"}[rng.IntN(2)]))
		}
		return nil
	}
	tolerations := func() []resourceapi.DeviceToleration {
		switch rng.IntN(4) {
		case 0:
			return []resourceapi.DeviceToleration{{Key: "k", Operator: resourceapi.DeviceTolerationOpExists}}
		case 1:
			return []resourceapi.DeviceToleration{{Operator: resourceapi.DeviceTolerationOpExists}}
		}
		return nil
	}
	var claims []*resourceapi.ResourceClaim
	for i, k := 0, 4+rng.IntN(4); i < k; i++ {
		var reqs []resourceapi.DeviceRequest
		for j, nr := 0, 1+rng.IntN(2); j < nr; j++ {
			name := fmt.Sprintf("r%d", j)
			switch rng.IntN(5) {
			case 0:
				reqs = append(reqs, resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
					DeviceClassName: "gpu", Selectors: selector(), AllocationMode: resourceapi.DeviceAllocationModeAll, Tolerations: tolerations()}})
			case 1:
				reqs = append(reqs, resourceapi.DeviceRequest{Name: name, FirstAvailable: []resourceapi.DeviceSubRequest{
					{Name: "a", DeviceClassName: "gpu", Selectors: selector(), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(2 + rng.IntN(2)), Tolerations: tolerations()},
					{Name: "b", DeviceClassName: "gpu", Selectors: selector(), AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, Tolerations: tolerations()},
				}})
			default:
				r := upExact(name, int64(1+rng.IntN(3)), selector())
				r.Exactly.Tolerations = tolerations()
				if shared && rng.IntN(2) == 0 {
					r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
						"bw": *resource.NewQuantity(int64(1+rng.IntN(6)), resource.DecimalSI)}}
				}
				reqs = append(reqs, r)
			}
		}
		c := upClaim(fmt.Sprintf("claim-%d", i), reqs...)
		switch rng.IntN(4) {
		case 0:
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(upDriver + "/numa"))}}
		case 1:
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(upDriver + "/numa"))}}
		case 2:
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(upDriver + "/model"))}}
		}
		claims = append(claims, c)
	}
	diffExtend(seed, objs, claims)
	diffDuplicateNames(seed, objs)
	diffWide(seed, objs, claims)
	return objs, claims
}

// diffWide sometimes gives one node a pool of 26 to 33 more devices, so
// that allocationMode All, with the claim's other requests, meets the
// limit of 32 results: the allocator's check before its search (an error
// on that node), and its search unwinding to a firstAvailable request
// (sometimes asking for 20 devices).
func diffWide(seed uint64, objs *input.Objects, claims []*resourceapi.ResourceClaim) {
	rng := rand.New(rand.NewPCG(seed, 47))
	if rng.IntN(6) != 0 {
		return
	}
	node := objs.Nodes[rng.IntN(len(objs.Nodes))].Name
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "wide"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: upDriver, Pool: resourceapi.ResourcePool{Name: "wide", Generation: 1, ResourceSliceCount: 1}, NodeName: ptr.To(node)}}
	for i, k := 0, 26+rng.IntN(8); i < k; i++ {
		d := resourceapi.Device{Name: fmt.Sprintf("w-%02d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"size":  {IntValue: ptr.To(int64(1 + rng.IntN(3)))},
			"model": {StringValue: ptr.To([]string{"a", "b"}[rng.IntN(2)])},
			"numa":  {IntValues: []int64{int64(rng.IntN(3))}},
		}}
		if rng.IntN(8) > 0 {
			d.Attributes["opt"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(rng.IntN(3)))}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	objs.Slices = append(objs.Slices, s)
	for _, c := range claims {
		for i := range c.Spec.Devices.Requests {
			if r := &c.Spec.Devices.Requests[i]; len(r.FirstAvailable) > 1 && r.FirstAvailable[0].AllocationMode == resourceapi.DeviceAllocationModeExactCount && rng.IntN(3) == 0 {
				r.FirstAvailable[0].Count = 20
			}
		}
	}
}

// diffDuplicateNames sometimes adds a pool "dup" (one generation, counters
// in a slice of their own) whose device x-0 is in the slice of every node:
// upstream checks device names among a node's slices only, so each node
// uses its own x-0 (and sometimes x-1), and an allocated x-0 consumes for
// all of them.
// Sometimes x-0 is also in a slice on all nodes, which makes the pool
// invalid on every node; sometimes an existing claim holds x-0.
func diffDuplicateNames(seed uint64, objs *input.Objects) {
	rng := rand.New(rand.NewPCG(seed, 43))
	if rng.IntN(4) != 0 {
		return
	}
	everywhere, second := rng.IntN(4) == 0, rng.IntN(3) == 0
	count := int64(len(objs.Nodes) + 1)
	if everywhere {
		count++
	}
	pool := resourceapi.ResourcePool{Name: "dup", Generation: 1, ResourceSliceCount: count}
	one := map[string]resourceapi.Counter{"n": {Value: *resource.NewQuantity(1, resource.DecimalSI)}}
	dev := func(name string) resourceapi.Device {
		d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"size":  {IntValue: ptr.To(int64(1 + rng.IntN(3)))},
			"model": {StringValue: ptr.To([]string{"a", "b"}[rng.IntN(2)])},
			"numa":  {IntValues: []int64{int64(rng.IntN(3))}},
		}}
		if rng.IntN(4) > 0 {
			d.Attributes["opt"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(rng.IntN(3)))}
		}
		if rng.IntN(2) == 0 {
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "dc", Counters: one}}
		}
		return d
	}
	objs.Slices = append(objs.Slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dup-counters"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: upDriver, Pool: pool, AllNodes: ptr.To(true), SharedCounters: []resourceapi.CounterSet{{Name: "dc", Counters: map[string]resourceapi.Counter{
			"n": {Value: *resource.NewQuantity(int64(1+rng.IntN(3)), resource.DecimalSI)}}}}}})
	for _, n := range objs.Nodes {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dup-" + n.Name}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, Pool: pool, NodeName: ptr.To(n.Name)}}
		s.Spec.Devices = append(s.Spec.Devices, dev("x-0"))
		if second {
			s.Spec.Devices = append(s.Spec.Devices, dev("x-1"))
		}
		if rng.IntN(2) == 0 {
			s.Spec.Devices = append(s.Spec.Devices, dev("x-"+n.Name))
		}
		objs.Slices = append(objs.Slices, s)
	}
	if everywhere {
		objs.Slices = append(objs.Slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dup-all"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, Pool: pool, AllNodes: ptr.To(true), Devices: []resourceapi.Device{dev("x-0")}}})
	}
	if rng.IntN(3) == 0 {
		r := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: upDriver, Pool: "dup", Device: "x-0"}
		c := upClaim("existing-dup", upExact("r", 1, nil))
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}}}
		objs.Claims = append(objs.Claims, c)
	}
}

// diffExtend widens diffInstance's instances with the rest of the API, from
// its own random stream: node labels with a slice for a node selector and
// a slice with per-device node selection (a device per node, on all nodes,
// by selector), binding conditions (their pools come last in the
// allocator's order) and bindsToNode, taints with effect None and
// tolerations by value, compatibility groups, an existing share and an
// existing admin-access result, a validValues capacity and capacity on a device
// that is not shared, admin access, an All subrequest in firstAvailable,
// constraints limited to some requests, and selectors reading an attribute
// only some devices have (DRASAT_DIFF_NO_CELERR=1 leaves them out).
func diffExtend(seed uint64, objs *input.Objects, claims []*resourceapi.ResourceClaim) {
	rng := rand.New(rand.NewPCG(seed, 41))
	zones := []string{"a", "b"}
	for i, n := range objs.Nodes {
		n.Labels = map[string]string{"zone": zones[(i+rng.IntN(2))%2]}
	}
	attrs := func() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		m := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"size":  {IntValue: ptr.To(int64(1 + rng.IntN(3)))},
			"model": {StringValue: ptr.To([]string{"a", "b"}[rng.IntN(2)])},
		}
		if rng.IntN(3) > 0 {
			m["numa"] = resourceapi.DeviceAttribute{IntValues: []int64{int64(rng.IntN(3))}}
		}
		return m
	}
	inZone := func(z string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{z}}}}}}
	}
	if rng.IntN(3) == 0 {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "zoned"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, Pool: resourceapi.ResourcePool{Name: "zoned", Generation: 1, ResourceSliceCount: 1}, NodeSelector: inZone(zones[rng.IntN(2)])}}
		for i, k := 0, 1+rng.IntN(2); i < k; i++ {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("z-%d", i), Attributes: attrs()})
		}
		objs.Slices = append(objs.Slices, s)
	}
	if rng.IntN(3) == 0 {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "perdev"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, Pool: resourceapi.ResourcePool{Name: "perdev", Generation: 1, ResourceSliceCount: 1}, PerDeviceNodeSelection: ptr.To(true)}}
		for i, k := 0, 1+rng.IntN(3); i < k; i++ {
			d := resourceapi.Device{Name: fmt.Sprintf("p-%d", i), Attributes: attrs()}
			switch rng.IntN(3) {
			case 0:
				d.NodeName = ptr.To(objs.Nodes[rng.IntN(len(objs.Nodes))].Name)
			case 1:
				d.AllNodes = ptr.To(true)
			default:
				d.NodeSelector = inZone(zones[rng.IntN(2)])
			}
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
		objs.Slices = append(objs.Slices, s)
	}
	for _, s := range objs.Slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if len(d.ConsumesCounters) > 0 && rng.IntN(3) == 0 {
				// Compatibility groups (KEP-5963): devices drawing on one
				// counter set must share a group.
				d.ConsumesCounters[0].CompatibilityGroups = [][]string{{"x"}, {"y"}, {"x", "y"}}[rng.IntN(3)]
			}
			switch rng.IntN(12) {
			case 0:
				d.BindingConditions, d.BindingFailureConditions = []string{"ready"}, []string{"failed"}
				d.BindsToNode = ptr.To(s.Spec.NodeName != nil || d.NodeName != nil)
			case 1:
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: "soft", Effect: resourceapi.DeviceTaintEffectNone})
			case 2:
				d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: "v", Value: []string{"x", "y"}[rng.IntN(2)], Effect: resourceapi.DeviceTaintEffectNoSchedule})
			case 3:
				if d.AllowMultipleAllocations == nil {
					// Capacity on a device that is not shared: a request
					// for it must fit in the value, and takes the device.
					d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"bw": {Value: *resource.NewQuantity(int64(2+rng.IntN(4)), resource.DecimalSI)}}
				}
			}
			if ptr.Deref(d.AllowMultipleAllocations, false) && rng.IntN(3) == 0 {
				bw := d.Capacity["bw"]
				bw.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: resource.NewQuantity(2, resource.DecimalSI),
					ValidValues: []resource.Quantity{*resource.NewQuantity(2, resource.DecimalSI), *resource.NewQuantity(4, resource.DecimalSI)}}
				d.Capacity["bw"] = bw
			}
		}
	}
	// An existing share of a shared device, and an existing admin-access
	// result.
	for _, s := range objs.Slices {
		if s.Name != "nics" || rng.IntN(2) == 0 {
			continue
		}
		q := *resource.NewQuantity(int64(1+rng.IntN(4)), resource.DecimalSI)
		r := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: upDriver, Pool: "nics", Device: s.Spec.Devices[0].Name,
			ShareID: ptr.To(types.UID("00000000-0000-4000-8000-000000000001")), ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"bw": q}}
		c := upClaim("existing-share", upExact("r", 1, nil))
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}}}
		objs.Claims = append(objs.Claims, c)
	}
	if rng.IntN(4) == 0 && len(objs.Slices[0].Spec.Devices) > 0 {
		s := objs.Slices[0]
		r := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: upDriver, Pool: s.Spec.Pool.Name, Device: s.Spec.Devices[rng.IntN(len(s.Spec.Devices))].Name, AdminAccess: ptr.To(true)}
		c := upClaim("existing-admin", upExact("r", 1, nil))
		c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}}}
		objs.Claims = append(objs.Claims, c)
	}
	// Selectors reading an attribute only some devices have fail at run
	// time on the others: whether the allocator meets that error depends
	// on its search order.
	celErrors := os.Getenv("DRASAT_DIFF_NO_CELERR") == ""
	if celErrors {
		for _, s := range objs.Slices {
			for i := range s.Spec.Devices {
				if rng.IntN(4) > 0 {
					s.Spec.Devices[i].Attributes["opt"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(rng.IntN(3)))}
				}
			}
		}
	}
	for _, c := range claims {
		reqs := c.Spec.Devices.Requests
		for i := range reqs {
			r := &reqs[i]
			if celErrors && rng.IntN(4) == 0 {
				sel := upSel(fmt.Sprintf(`device.attributes["%s"].opt >= %d`, upDriver, rng.IntN(3)))
				if r.Exactly != nil {
					r.Exactly.Selectors = sel
				} else {
					r.FirstAvailable[rng.IntN(len(r.FirstAvailable))].Selectors = sel
				}
			}
			switch {
			case r.Exactly != nil && rng.IntN(8) == 0:
				r.Exactly.AdminAccess = ptr.To(true)
			case r.Exactly != nil && rng.IntN(6) == 0:
				r.Exactly.Tolerations = append(r.Exactly.Tolerations, resourceapi.DeviceToleration{Key: "v", Operator: resourceapi.DeviceTolerationOpEqual, Value: "x"})
			case r.Exactly != nil && r.Exactly.Capacity == nil && rng.IntN(8) == 0:
				r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					"bw": *resource.NewQuantity(int64(1+rng.IntN(4)), resource.DecimalSI)}}
			case len(r.FirstAvailable) > 1 && rng.IntN(3) == 0:
				r.FirstAvailable[1].AllocationMode, r.FirstAvailable[1].Count = resourceapi.DeviceAllocationModeAll, 0
			}
		}
		for i, k := range c.Spec.Devices.Constraints {
			if celErrors && k.MatchAttribute != nil && rng.IntN(3) == 0 {
				// A derived attribute (alpha) shadowing the constraint's,
				// failing where opt is missing.
				r := &reqs[rng.IntN(len(reqs))]
				da := []resourceapi.DeviceDerivedAttribute{{Name: *k.MatchAttribute, Expression: fmt.Sprintf(`device.attributes["%s"].opt`, upDriver)}}
				if r.Exactly != nil {
					r.Exactly.DerivedAttributes = da
				} else {
					r.FirstAvailable[0].DerivedAttributes = da
				}
			}
			if len(reqs) > 1 && rng.IntN(3) == 0 {
				name := reqs[rng.IntN(len(reqs))].Name
				if len(reqs[0].FirstAvailable) > 0 && rng.IntN(2) == 0 {
					name = reqs[0].Name + "/" + reqs[0].FirstAvailable[rng.IntN(2)].Name
				}
				c.Spec.Devices.Constraints[i].Requests = []string{name}
			}
		}
	}
}

// upstreamErrorsSomewhere runs the upstream allocator for the instance's
// pending claim on each node alone and returns the first error that would
// abort the scheduling attempt ("" if none): the sequential baseline stops
// at the first node that fits and never sees errors on later nodes.
func upstreamErrorsSomewhere(t *testing.T, label string, objs *input.Objects) string {
	for _, n := range objs.Nodes {
		one := *objs
		one.Nodes = []*corev1.Node{n}
		res, err := baseline.Upstream(context.Background(), &one, baseline.UpstreamFeatures{Allocator: &allFeatures})
		if err != nil {
			t.Fatalf("Upstream: %v", err)
		}
		validateAllocations(t, label+" on "+n.Name+" alone: upstream", &one, res.Allocated)
		for _, r := range res.Rejected {
			if !strings.HasPrefix(r.Reason, "cannot allocate all claims on any of") {
				return "node " + n.Name + ": " + r.Reason
			}
		}
	}
	return ""
}

// TestSingleClaimFeasibilityMatchesUpstream: on random small instances,
// for every claim on its own (with the instance's existing allocation),
// drasat allocates it exactly when the upstream allocator (all features
// on, every node tried) can.
func TestSingleClaimFeasibilityMatchesUpstream(t *testing.T) {
	seeds := 120
	if testing.Short() {
		seeds = 30
	}
	if n, err := strconv.Atoi(os.Getenv("DRASAT_DIFF_SEEDS")); err == nil && n > 0 {
		seeds = n // a longer run by hand: DRASAT_DIFF_SEEDS=5000
	}
	first := uint64(1)
	if n, err := strconv.ParseUint(os.Getenv("DRASAT_DIFF_FIRST"), 10, 64); err == nil && n > 0 {
		first = n // reproduce one seed: DRASAT_DIFF_FIRST=846 DRASAT_DIFF_SEEDS=1
	}
	var total, feasible, disagree, limited int
	for seed := first; seed < first+uint64(seeds); seed++ {
		base, claims := diffInstance(seed)
		for _, c := range claims {
			objs := *base
			objs.Claims = append(append([]*resourceapi.ResourceClaim(nil), base.Claims...), c)
			// Validated below, once the other nodes are known not to fail:
			// the baseline stops at the first node that fits.
			up, err := baseline.Upstream(context.Background(), &objs, baseline.UpstreamFeatures{Allocator: &allFeatures})
			if err != nil {
				t.Fatalf("Upstream: %v", err)
			}
			dr := runDrasatAs(t, fmt.Sprintf("seed %d, %s: drasat", seed, c.Name), &objs, model.CompatKEP5963)
			total++
			upOK, drOK := len(up.Allocated) == 1, len(dr) == 1
			if upOK {
				// The scheduler filters every node at once, and an
				// error on any of them aborts the attempt.
				if why := upstreamErrorsSomewhere(t, fmt.Sprintf("seed %d, %s", seed, c.Name), &objs); why != "" {
					upOK = false
					up.Rejected = append(up.Rejected, baseline.UpstreamRejection{Reason: why})
				}
			}
			if upOK {
				feasible++
				validateAllocations(t, fmt.Sprintf("seed %d, %s: upstream", seed, c.Name), &objs, up.Allocated)
			}
			for _, r := range up.Rejected {
				if strings.Contains(r.Reason, "exceeds the claim limit") {
					limited++ // the generator reaches the result limit's error
				}
			}
			if upOK != drOK {
				disagree++
				var why []string
				for _, r := range up.Rejected {
					why = append(why, r.Reason)
				}
				t.Errorf("seed %d, %s: upstream allocates: %v (%s), drasat: %v\nupstream: %v\ndrasat: %v",
					seed, c.Name, upOK, strings.Join(why, "; "), drOK, placement(up.Allocated), placement(dr))
			}
		}
	}
	t.Logf("%d single claims on %d instances (seeds %d-%d): %d feasible for upstream, %d failing there on the result limit, %d disagreements", total, seeds, first, first+uint64(seeds)-1, feasible, limited, disagree)
	if feasible == 0 || feasible == total {
		t.Errorf("degenerate instances: %d of %d feasible", feasible, total)
	}
}

// TestResultLimitFixturesMatchUpstream: the shared fixture of the result
// limit's unwinding (../testdata/order/limit-unwind.yaml), and the same
// with a second node where the claim fits while node-1's limit check fails
// (19 x and all 14 y: 33): the upstream allocator and drasat agree on
// both.
func TestResultLimitFixturesMatchUpstream(t *testing.T) {
	load := func() *input.Objects {
		objs, _, err := input.Load([]string{"../testdata/order/limit-unwind.yaml"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	unwind := load()
	up := runUpstream(t, unwind, baseline.UpstreamFeatures{Allocator: &allFeatures})
	dr := runDrasat(t, unwind, model.CompatKEP5963)
	if len(up.Allocated) != 1 || len(dr) != 1 || !equalPlacement(placement(up.Allocated), placement(dr)) {
		t.Errorf("unwind: upstream %v %v, drasat %v", placement(up.Allocated), up.Rejected, placement(dr))
	}
	// Subrequest many past the limit alone, one for 19 x; node-1 gets a
	// 14th y (19 + 14 = 33), node-2 has 19 x and one y (fits).
	limit := load()
	limit.Claims[0].Spec.Devices.Requests[0].FirstAvailable[0].Count = 40
	limit.Claims[0].Spec.Devices.Requests[0].FirstAvailable[1].Count = 19
	devs := &limit.Slices[0].Spec.Devices
	extra := (*devs)[21].DeepCopy()
	extra.Name = "y-13"
	node2 := limit.Slices[0].DeepCopy()
	node2.Name, node2.Spec.NodeName, node2.Spec.Pool.Name = "s2", ptr.To("node-2"), "p2"
	node2.Spec.Devices = append(node2.Spec.Devices[:19], node2.Spec.Devices[21])
	*devs = append(*devs, *extra)
	limit.Slices = append(limit.Slices, node2)
	limit.Nodes = append(limit.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}})
	why := upstreamErrorsSomewhere(t, "limit", limit)
	dr = runDrasat(t, limit, model.CompatKEP5963)
	if why == "" || !strings.Contains(why, "exceeds the claim limit") || len(dr) != 0 {
		t.Errorf("limit: upstream error %q, drasat %v", why, placement(dr))
	}
}

// upstreamInOrder is the scheduler taking the pending claims of an
// instance one at a time, in input order, each with the claims before it
// allocated: the upstream allocator on every node, an error on any node
// rejecting the claim, else the first node where it fits.
func upstreamInOrder(t *testing.T, label string, base *input.Objects, claims []*resourceapi.ResourceClaim) []*resourceapi.ResourceClaim {
	var placed []*resourceapi.ResourceClaim
	for _, c := range claims {
		one := *base
		one.Claims = append(append(slices.Clone(base.Claims), placed...), c)
		up, err := baseline.Upstream(context.Background(), &one, baseline.UpstreamFeatures{Allocator: &allFeatures})
		if err != nil {
			t.Fatalf("Upstream: %v", err)
		}
		if len(up.Allocated) == 1 && upstreamErrorsSomewhere(t, label+", "+c.Name, &one) == "" {
			placed = append(placed, up.Allocated[0])
		}
	}
	return placed
}

// TestBatchAdmitsAtLeastUpstream: on random small instances from the same
// generator, all claims at once: every allocation drasat makes passes
// check/, and drasat admits at least as many claims as the scheduler
// taking them one by one in input order (upstreamInOrder), whose result
// also passes check/. DRASAT_BATCH_SEEDS=N runs N instances instead of 40,
// DRASAT_BATCH_FIRST=S starts at seed S.
func TestBatchAdmitsAtLeastUpstream(t *testing.T) {
	seeds := 40
	if n, err := strconv.Atoi(os.Getenv("DRASAT_BATCH_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	first := uint64(1)
	if n, err := strconv.ParseUint(os.Getenv("DRASAT_BATCH_FIRST"), 10, 64); err == nil && n > 0 {
		first = n
	}
	var upTotal, drTotal, fewer, more int
	for seed := first; seed < first+uint64(seeds); seed++ {
		base, claims := diffInstance(seed)
		label := fmt.Sprintf("seed %d", seed)
		up := upstreamInOrder(t, label, base, claims)
		objs := *base
		objs.Claims = append(slices.Clone(base.Claims), claims...)
		validateAllocations(t, label+": upstream in order", &objs, up)
		dr := runDrasatAs(t, label+": drasat", &objs, model.CompatKEP5963)
		upTotal += len(up)
		drTotal += len(dr)
		switch {
		case len(dr) < len(up):
			fewer++
			t.Errorf("%s: drasat admits %d claims, upstream in order %d\nupstream: %v\ndrasat: %v", label, len(dr), len(up), placement(up), placement(dr))
		case len(dr) > len(up):
			more++
		}
	}
	t.Logf("%d instances (seeds %d-%d): upstream in order admits %d claims, drasat %d; drasat more on %d, fewer on %d",
		seeds, first, first+uint64(seeds)-1, upTotal, drTotal, more, fewer)
}

// TestPlacedLastMatchesUpstream: node-1 has a (numa 0), b (numa 1), both
// kind one, and c (numa 1), kind all. Claim first asks for one kind-one
// device of numa 0; claim c for one kind-one device, then all of kind all,
// under matchAttribute numa. From the existing allocations alone, c's
// search takes a, then adding c breaks the constraint: an error. With
// first placed before it (holding a), the search takes b, then c. The
// scheduler taking them in that order allocates both; so does drasat,
// placing c last.
func TestPlacedLastMatchesUpstream(t *testing.T) {
	sel := func(e string) []resourceapi.DeviceSelector { return upSel(e) }
	dev := func(name string, numa int64, kind string) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"numa": {IntValue: ptr.To(numa)}, "kind": {StringValue: ptr.To(kind)}}}
	}
	objs := &input.Objects{Classes: []*resourceapi.DeviceClass{upClass()},
		Nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}},
		Slices: []*resourceapi.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: upDriver, NodeName: ptr.To("node-1"), Pool: resourceapi.ResourcePool{Name: "p1", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{dev("a", 0, "one"), dev("b", 1, "one"), dev("c", 1, "all")}}}}}
	first := upClaim("first", upExact("r", 1, sel(fmt.Sprintf(`device.attributes["%s"].kind == "one" && device.attributes["%s"].numa == 0`, upDriver, upDriver))))
	all := upExact("all", 1, sel(fmt.Sprintf(`device.attributes["%s"].kind == "all"`, upDriver)))
	all.Exactly.AllocationMode, all.Exactly.Count = resourceapi.DeviceAllocationModeAll, 0
	c := upClaim("c", upExact("one", 1, sel(fmt.Sprintf(`device.attributes["%s"].kind == "one"`, upDriver))), all)
	c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(upDriver + "/numa"))}}
	up := upstreamInOrder(t, "placed last", objs, []*resourceapi.ResourceClaim{first, c})
	objs.Claims = []*resourceapi.ResourceClaim{first, c}
	validateAllocations(t, "upstream in order", objs, up)
	dr := runDrasat(t, objs, model.CompatKEP5963)
	want := map[string][]string{"first": {"a"}, "c": {"b", "c"}}
	if !equalPlacement(placement(up), want) || !equalPlacement(placement(dr), want) {
		t.Errorf("upstream in order %v, drasat %v, want %v", placement(up), placement(dr), want)
	}
	// Alone, c fails: its search from the existing allocations errs.
	objs.Claims = []*resourceapi.ResourceClaim{c}
	if got := runDrasat(t, objs, model.CompatKEP5963); len(got) != 0 {
		t.Errorf("c alone: drasat allocates %v", placement(got))
	}
}
