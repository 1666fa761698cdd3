package bench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// The generator below is independent of diffInstance: it is written from
// the resource.k8s.io/v1 API and the upstream allocator's source, and aims
// at what those allow that a driver rarely publishes. Every instance is
// valid API input: the only findings model.Validate may report are the
// pool-level ones the API server cannot see (the allocator's own checks).
//
// What it draws:
//   - 1-3 nodes with zone and rack labels; two or three drivers (one of them
//     a short name, so the bare-identifier lookup is tried with and without
//     domain), several pools per driver and per node;
//   - pools published with nodeName, nodeSelector (matchExpressions or
//     matchFields), allNodes, or perDeviceNodeSelection (each device its own
//     nodeName, nodeSelector or allNodes), split over several slices whose
//     names do not follow publication order; counter sets in a slice of their
//     own whose node selection may differ from the devices' (another node,
//     all nodes); several counter sets per pool and devices consuming from
//     several; zero, fractional and large quantities; sometimes an outdated
//     generation next to the current one, or an incomplete pool;
//   - attributes under the driver's domain (looked up bare or qualified),
//     under a common domain shared by drivers, of every scalar type,
//     missing on some devices; capacities with and without requestPolicy
//     (default, validValues, validRange with and without step and max) on
//     shared devices (allowMultipleAllocations); taints of every effect;
//   - classes with and without selectors and with config;
//   - existing claims with status.allocation: exclusive devices, shares with
//     shareID and consumedCapacity, admin access, and allocations that
//     together overdraw counters or capacity (valid: the API server does not
//     check them);
//   - pending claims with ExactCount (count 1-3), All, firstAvailable of
//     mixed subrequests, selectors of class and request together, CEL on
//     driver, attributes (has(), cel.bind, missing keys that fail at run
//     time), capacity with isGreaterThan/compareTo, semver, selectors
//     matching nothing, tolerations (Exists/Equal, with and without effect),
//     admin access, capacity requests, and matchAttribute /
//     distinctAttribute constraints on every type, on all requests, some,
//     or subrequests ("req/sub").

var indepDrivers = []string{"gpu.example.com", "nic.example.org", "dra"}

type indepGen struct {
	r     *rand.Rand
	nodes []*corev1.Node
	objs  *input.Objects
	// devices published, for existing allocations: driver/pool/name with
	// the device itself.
	devs []indepDev
	uid  int
}

type indepDev struct {
	driver, pool string
	node         string // the slice's or the device's nodeName, if any
	dev          *resourceapi.Device
}

func (g *indepGen) pct(p int) bool          { return g.r.IntN(100) < p }
func (g *indepGen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func indepQ(s string) resource.Quantity { return resource.MustParse(s) }

var indepZones = []string{"a", "b"}

func (g *indepGen) nodeSelector() *corev1.NodeSelector {
	switch g.r.IntN(3) {
	case 0:
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{g.pick(indepZones)}}}}}}
	case 1:
		// The API allows exactly one value for metadata.name.
		names := []string{g.nodes[g.r.IntN(len(g.nodes))].Name}
		if g.pct(15) {
			names = []string{"node-x"} // a node that does not exist
		}
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: names}}}}}
	default:
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "rack", Operator: corev1.NodeSelectorOpExists}}}}}
	}
}

// quantity draws from small, zero, fractional and large values.
func (g *indepGen) quantity() resource.Quantity {
	return indepQ(g.pick([]string{"0", "1", "1", "2", "4", "8", "500m", "1Gi", "4Gi", "16Gi", "40Gi", "1E", "3"}))
}

func (g *indepGen) attrs(driver string, d *resourceapi.Device) {
	d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	set := func(name string, a resourceapi.DeviceAttribute) {
		d.Attributes[resourceapi.QualifiedName(name)] = a
	}
	if g.pct(80) {
		name := "model"
		if g.pct(30) && strings.Contains(driver, ".") {
			name = driver + "/model" // qualified with its own domain
		}
		set(name, resourceapi.DeviceAttribute{StringValue: ptr.To(g.pick([]string{"a100", "h100", "t4"}))})
	}
	if g.pct(75) {
		set("common.k8s.io/numa", resourceapi.DeviceAttribute{IntValue: ptr.To(int64(g.r.IntN(3)))})
	}
	if g.pct(60) {
		set("example.com/fast", resourceapi.DeviceAttribute{BoolValue: ptr.To(g.pct(50))})
	}
	if g.pct(60) {
		set("driverVersion", resourceapi.DeviceAttribute{VersionValue: ptr.To(g.pick([]string{"1.0.0", "1.2.0", "2.0.0-rc.1", "1.2.0+build.5"}))})
	}
	if g.pct(30) {
		set("common.k8s.io/pcieRoot", resourceapi.DeviceAttribute{StringValue: ptr.To(g.pick([]string{"pci0", "pci1"}))})
	}
}

func (g *indepGen) capacity(d *resourceapi.Device) {
	if !g.pct(60) {
		return
	}
	d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
	shared := g.pct(35)
	if shared {
		d.AllowMultipleAllocations = ptr.To(true)
	}
	mem := g.pick([]string{"0", "1Gi", "8Gi", "16Gi", "80Gi"})
	c := resourceapi.DeviceCapacity{Value: indepQ(mem)}
	if shared && mem != "0" && g.pct(70) {
		switch g.r.IntN(3) {
		case 0:
			c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(indepQ("1Gi"))}
			if mem == "1Gi" {
				c.RequestPolicy.Default = ptr.To(indepQ("512Mi"))
			}
		case 1:
			vals := []resource.Quantity{indepQ("512Mi"), indepQ("1Gi")}
			if mem != "1Gi" {
				vals = append(vals, indepQ(mem))
			}
			c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(vals[g.r.IntN(len(vals))]), ValidValues: vals}
		default:
			r := &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(indepQ("512Mi"))}
			if g.pct(60) {
				r.Step = ptr.To(indepQ("512Mi"))
			}
			if g.pct(50) {
				r.Max = ptr.To(indepQ(mem))
			}
			c.RequestPolicy = &resourceapi.CapacityRequestPolicy{Default: ptr.To(indepQ("1Gi")), ValidRange: r}
		}
	}
	d.Capacity["memory"] = c
	if g.pct(50) {
		d.Capacity["cores"] = resourceapi.DeviceCapacity{Value: indepQ(g.pick([]string{"1", "4", "16"}))}
	}
}

func (g *indepGen) taints(d *resourceapi.Device) {
	if !g.pct(20) {
		return
	}
	n := 1 + g.r.IntN(2)
	for i := 0; i < n; i++ {
		t := resourceapi.DeviceTaint{
			Key:    g.pick([]string{"example.com/broken", "maint"}),
			Value:  g.pick([]string{"", "yes"}),
			Effect: resourceapi.DeviceTaintEffect(g.pick([]string{"NoSchedule", "NoExecute", "None"})),
		}
		d.Taints = append(d.Taints, t)
	}
}

// pool publishes one pool of driver and returns its slices.
func (g *indepGen) pool(driver, name string, budget *int) {
	type sel struct {
		nodeName  *string
		allNodes  *bool
		selector  *corev1.NodeSelector
		perDevice bool
	}
	var where sel
	switch k := g.r.IntN(10); {
	case k < 4:
		where.nodeName = ptr.To(g.nodes[g.r.IntN(len(g.nodes))].Name)
	case k < 6:
		where.allNodes = ptr.To(true)
	case k < 8:
		where.selector = g.nodeSelector()
	default:
		where.perDevice = true
	}
	gen := int64(g.r.IntN(2))
	numDevSlices := 1 + g.r.IntN(2)
	var counterSets []resourceapi.CounterSet
	if g.pct(55) {
		for i := 0; i < 1+g.r.IntN(2); i++ {
			cs := resourceapi.CounterSet{Name: fmt.Sprintf("cs-%d", i), Counters: map[string]resourceapi.Counter{}}
			cs.Counters["mem"] = resourceapi.Counter{Value: indepQ(g.pick([]string{"0", "4Gi", "8Gi", "16Gi", "1E"}))}
			if g.pct(50) {
				cs.Counters["units"] = resourceapi.Counter{Value: indepQ(g.pick([]string{"1", "2", "3", "500m"}))}
			}
			counterSets = append(counterSets, cs)
		}
	}
	count := int64(numDevSlices)
	if counterSets != nil {
		count++
	}
	incomplete := g.pct(5)
	if incomplete {
		count++
	}
	// Slice names in random order, so name order is not publication order.
	sliceNames := []string{}
	for i := 0; i < int(count)+1; i++ {
		sliceNames = append(sliceNames, fmt.Sprintf("%s-%s-%c", driver, name, 'a'+rune(i)))
	}
	g.r.Shuffle(len(sliceNames), func(i, j int) { sliceNames[i], sliceNames[j] = sliceNames[j], sliceNames[i] })
	mk := func(sname string, generation int64) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: sname},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: driver,
				Pool:   resourceapi.ResourcePool{Name: name, Generation: generation, ResourceSliceCount: count},
			},
		}
		switch {
		case where.nodeName != nil:
			s.Spec.NodeName = ptr.To(*where.nodeName)
		case where.allNodes != nil:
			s.Spec.AllNodes = ptr.To(true)
		case where.selector != nil:
			s.Spec.NodeSelector = where.selector.DeepCopy()
		default:
			s.Spec.PerDeviceNodeSelection = ptr.To(true)
		}
		return s
	}
	devNum := 0
	makeDevices := func(s *resourceapi.ResourceSlice, n int) {
		for i := 0; i < n && *budget > 0; i++ {
			*budget--
			d := resourceapi.Device{Name: fmt.Sprintf("dev-%d", devNum)}
			devNum++
			g.attrs(driver, &d)
			g.capacity(&d)
			g.taints(&d)
			if len(counterSets) > 0 && g.pct(75) {
				for _, cs := range counterSets {
					if len(d.ConsumesCounters) > 0 && !g.pct(40) {
						continue
					}
					cc := resourceapi.DeviceCounterConsumption{CounterSet: cs.Name, Counters: map[string]resourceapi.Counter{}}
					for _, cn := range slices.Sorted(maps.Keys(cs.Counters)) {
						if len(cc.Counters) == 0 || g.pct(60) {
							v := g.pick([]string{"0", "1Gi", "2Gi", "4Gi", "8Gi"})
							if cn == "units" {
								v = g.pick([]string{"1", "1", "500m", "2"})
							}
							cc.Counters[cn] = resourceapi.Counter{Value: indepQ(v)}
						}
					}
					d.ConsumesCounters = append(d.ConsumesCounters, cc)
				}
			}
			if where.perDevice {
				switch g.r.IntN(3) {
				case 0:
					d.NodeName = ptr.To(g.nodes[g.r.IntN(len(g.nodes))].Name)
				case 1:
					d.AllNodes = ptr.To(true)
				default:
					d.NodeSelector = g.nodeSelector()
				}
			}
			if g.pct(5) && (where.allNodes != nil || where.selector != nil || where.perDevice) {
				d.BindsToNode = ptr.To(true)
			}
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
	}
	var out []*resourceapi.ResourceSlice
	ni := 0
	if counterSets != nil {
		s := mk(sliceNames[ni], gen)
		ni++
		s.Spec.SharedCounters = counterSets
		if g.pct(40) {
			// The counters' slice selects nodes differently from the
			// devices' slices.
			s.Spec.NodeName, s.Spec.AllNodes, s.Spec.NodeSelector, s.Spec.PerDeviceNodeSelection = nil, nil, nil, nil
			if g.pct(50) {
				s.Spec.AllNodes = ptr.To(true)
			} else {
				s.Spec.NodeName = ptr.To(g.nodes[g.r.IntN(len(g.nodes))].Name)
			}
		} else if where.perDevice {
			// A slice without devices selects by its own fields.
			s.Spec.PerDeviceNodeSelection = nil
			s.Spec.AllNodes = ptr.To(true)
		}
		out = append(out, s)
	}
	for i := 0; i < numDevSlices; i++ {
		s := mk(sliceNames[ni], gen)
		ni++
		makeDevices(s, 1+g.r.IntN(4))
		out = append(out, s)
	}
	// Devices must be referenced after all appends are done: take the
	// pointers again.
	if gen > 0 && g.pct(20) {
		// An outdated generation of one device slice, with other devices.
		s := mk(sliceNames[ni], gen-1)
		for i := 0; i < 2; i++ {
			d := resourceapi.Device{Name: fmt.Sprintf("old-%d", i)}
			g.attrs(driver, &d)
			if where.perDevice {
				d.AllNodes = ptr.To(true)
			}
			s.Spec.Devices = append(s.Spec.Devices, d)
		}
		out = append(out, s)
	}
	g.objs.Slices = append(g.objs.Slices, out...)
}

var indepSelectors = []string{
	`device.driver == "gpu.example.com"`,
	`device.driver != "dra"`,
	`has(device.attributes["common.k8s.io"].numa) && device.attributes["common.k8s.io"].numa == 0`,
	`cel.bind(m, device.attributes[device.driver], has(m.model) && m.model != "t4")`,
	`"fast" in device.attributes["example.com"] && device.attributes["example.com"].fast`,
	`has(device.capacity[device.driver].memory) && device.capacity[device.driver].memory.isGreaterThan(quantity("4Gi"))`,
	`!has(device.capacity[device.driver].memory) || device.capacity[device.driver].memory.compareTo(quantity("16Gi")) <= 0`,
	`has(device.attributes[device.driver].driverVersion) && device.attributes[device.driver].driverVersion.isGreaterThan(semver("1.1.0"))`,
	`device.allowMultipleAllocations`,
	`!device.allowMultipleAllocations`,
	`device.attributes[device.driver].?model.orValue("none") in ["a100", "h100"]`,
}

// indepFailing are selectors that fail at run time on devices without the
// attribute (an error for the allocator when its search reaches one), or
// match nothing.
var indepFailing = []string{
	`device.attributes["gpu.example.com"].model == "a100"`,
	`device.attributes["common.k8s.io"].numa < 2`,
	`device.attributes["nic.example.org"].model.startsWith("h")`,
	`false`,
}

func (g *indepGen) selectors(n int) []resourceapi.DeviceSelector {
	var out []resourceapi.DeviceSelector
	for i := 0; i < n; i++ {
		expr := g.pick(indepSelectors)
		if g.pct(12) {
			expr = g.pick(indepFailing)
		}
		out = append(out, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}})
	}
	return out
}

func (g *indepGen) classes() {
	raw := runtime.RawExtension{Raw: []byte(`{"kind":"cfg"}`)}
	g.objs.Classes = []*resourceapi.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "any"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
			{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "picky"}, Spec: resourceapi.DeviceClassSpec{
			Selectors: g.selectors(1),
			Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: raw}}}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Spec: resourceapi.DeviceClassSpec{
			Config: []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "nic.example.org", Parameters: raw}}}},
		}},
	}
}

func (g *indepGen) tolerations() []resourceapi.DeviceToleration {
	if !g.pct(35) {
		return nil
	}
	var out []resourceapi.DeviceToleration
	for i := 0; i < 1+g.r.IntN(2); i++ {
		t := resourceapi.DeviceToleration{Effect: resourceapi.DeviceTaintEffect(g.pick([]string{"", "NoSchedule", "NoExecute"}))}
		switch g.r.IntN(3) {
		case 0:
			t.Operator = resourceapi.DeviceTolerationOpExists // key empty: every taint
			if g.pct(50) {
				t.Key = g.pick([]string{"example.com/broken", "maint"})
			}
		case 1:
			t.Operator = resourceapi.DeviceTolerationOpEqual
			t.Key = g.pick([]string{"example.com/broken", "maint"})
			t.Value = g.pick([]string{"", "yes"})
		default:
			t.Key = g.pick([]string{"example.com/broken", "maint"}) // operator defaults to Equal
			t.Value = "yes"
		}
		if t.Effect == resourceapi.DeviceTaintEffectNoExecute && g.pct(30) {
			t.TolerationSeconds = ptr.To(int64(60))
		}
		out = append(out, t)
	}
	return out
}

func (g *indepGen) capacityRequest() *resourceapi.CapacityRequirements {
	if !g.pct(20) {
		return nil
	}
	return &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
		"memory": indepQ(g.pick([]string{"0", "100Mi", "1Gi", "1500Mi", "4Gi", "20Gi"}))}}
}

var indepConstraintAttrs = []string{
	"common.k8s.io/numa", "gpu.example.com/model", "nic.example.org/model", "dra/model",
	"example.com/fast", "gpu.example.com/driverVersion", "common.k8s.io/pcieRoot", "example.com/absent",
}

func (g *indepGen) exact(class string) *resourceapi.ExactDeviceRequest {
	e := &resourceapi.ExactDeviceRequest{
		DeviceClassName: class,
		Selectors:       g.selectors(g.r.IntN(3) / 2 * (1 + g.r.IntN(2))),
		Tolerations:     g.tolerations(),
		Capacity:        g.capacityRequest(),
	}
	if g.pct(15) {
		e.AllocationMode = resourceapi.DeviceAllocationModeAll
	} else {
		e.AllocationMode = resourceapi.DeviceAllocationModeExactCount
		e.Count = int64(1 + g.r.IntN(3)/2 + g.r.IntN(2)*g.r.IntN(2))
	}
	if g.pct(8) {
		e.AdminAccess = ptr.To(true)
	}
	return e
}

func (g *indepGen) className() string {
	return g.pick([]string{"any", "any", "gpu", "picky", "cfg"})
}

func (g *indepGen) claimName(prefix string) string {
	g.uid++
	return fmt.Sprintf("%s-%d", prefix, g.uid)
}

func (g *indepGen) NewClaim(prefix string) *resourceapi.ResourceClaim {
	name := g.claimName(prefix)
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
}

func (g *indepGen) pending() *resourceapi.ResourceClaim {
	c := g.NewClaim("claim")
	spec := &c.Spec.Devices
	var names []string // requests and subrequests that constraints may name
	for i := 0; i < 1+g.r.IntN(3)/2+g.r.IntN(2); i++ {
		rname := fmt.Sprintf("r%d", i)
		req := resourceapi.DeviceRequest{Name: rname}
		names = append(names, rname)
		if g.pct(30) {
			for j := 0; j < 2+g.r.IntN(2); j++ {
				e := g.exact(g.className())
				sub := resourceapi.DeviceSubRequest{
					Name: fmt.Sprintf("s%d", j), DeviceClassName: e.DeviceClassName, Selectors: e.Selectors,
					AllocationMode: e.AllocationMode, Count: e.Count, Tolerations: e.Tolerations, Capacity: e.Capacity,
				}
				req.FirstAvailable = append(req.FirstAvailable, sub)
				names = append(names, rname+"/"+sub.Name)
			}
		} else {
			req.Exactly = g.exact(g.className())
		}
		spec.Requests = append(spec.Requests, req)
	}
	for i := 0; i < g.r.IntN(3); i++ {
		var con resourceapi.DeviceConstraint
		attr := resourceapi.FullyQualifiedName(g.pick(indepConstraintAttrs))
		if g.pct(65) {
			con.MatchAttribute = &attr
		} else {
			con.DistinctAttribute = &attr
		}
		if g.pct(50) {
			for _, n := range names {
				if g.pct(50) {
					con.Requests = append(con.Requests, n)
				}
			}
		}
		spec.Constraints = append(spec.Constraints, con)
	}
	if g.pct(20) {
		spec.Config = append(spec.Config, resourceapi.DeviceClaimConfiguration{
			Requests: []string{names[0]},
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: "dra", Parameters: runtime.RawExtension{Raw: []byte(`{"x":1}`)}}},
		})
	}
	return c
}

// existing adds claims with status.allocation on random devices, each
// device held by at most one of them unless shared; counters and capacity
// may end up overdrawn.
func (g *indepGen) existing() {
	used := map[string]bool{}
	for i := 0; i < g.r.IntN(3); i++ {
		c := g.NewClaim("held")
		admin := g.pct(20)
		req := resourceapi.DeviceRequest{Name: "r0", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "any", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
		if admin {
			req.Exactly.AdminAccess = ptr.To(true)
		}
		alloc := &resourceapi.AllocationResult{}
		// The devices of one allocation are on one node.
		node := g.nodes[g.r.IntN(len(g.nodes))].Name
		var devs []indepDev
		for _, d := range g.devs {
			if d.node == "" || d.node == node {
				devs = append(devs, d)
			}
		}
		for j := 0; j < 1+g.r.IntN(3) && len(devs) > 0; j++ {
			d := devs[g.r.IntN(len(devs))]
			key := d.driver + "/" + d.pool + "/" + d.dev.Name
			shared := ptr.Deref(d.dev.AllowMultipleAllocations, false)
			if used[key] && !shared && !admin {
				continue
			}
			res := resourceapi.DeviceRequestAllocationResult{Request: "r0", Driver: d.driver, Pool: d.pool, Device: d.dev.Name}
			if admin {
				res.AdminAccess = ptr.To(true)
			}
			if shared {
				g.uid++
				res.ShareID = ptr.To(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", g.uid)))
				if len(d.dev.Capacity) > 0 {
					res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{}
					for _, n := range slices.Sorted(maps.Keys(d.dev.Capacity)) {
						cp := d.dev.Capacity[n]
						v := cp.Value.DeepCopy()
						if g.pct(60) {
							v = indepQ(g.pick([]string{"0", "512Mi", "1Gi", "8Gi"}))
						}
						res.ConsumedCapacity[n] = v
					}
				}
			} else if !admin {
				used[key] = true
			}
			alloc.Devices.Results = append(alloc.Devices.Results, res)
		}
		if len(alloc.Devices.Results) == 0 {
			continue
		}
		req.Exactly.Count = int64(len(alloc.Devices.Results))
		c.Spec.Devices.Requests = []resourceapi.DeviceRequest{req}
		c.Status.Allocation = alloc
		g.objs.Claims = append(g.objs.Claims, c)
	}
}

// indepInstance draws one instance: the cluster with its existing claims,
// and the pending claims to try one at a time.
func indepInstance(seed uint64) (*input.Objects, []*resourceapi.ResourceClaim) {
	g := &indepGen{r: rand.New(rand.NewPCG(seed, 0x1de9)), objs: &input.Objects{}}
	for i := 0; i < 1+g.r.IntN(3); i++ {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i+1), Labels: map[string]string{
			"zone": indepZones[g.r.IntN(2)]}}}
		if g.pct(50) {
			n.Labels["rack"] = "r1"
		}
		g.nodes = append(g.nodes, n)
	}
	g.objs.Nodes = g.nodes
	budget := 24 + g.r.IntN(8)
	drivers := slices.Clone(indepDrivers)
	g.r.Shuffle(len(drivers), func(i, j int) { drivers[i], drivers[j] = drivers[j], drivers[i] })
	drivers = drivers[:2+g.r.IntN(2)]
	for _, drv := range drivers {
		for p := 0; p < 1+g.r.IntN(3) && budget > 0; p++ {
			g.pool(drv, fmt.Sprintf("pool-%d", p), &budget)
		}
	}
	// Collect the devices again from the final slices (pointers into
	// slices' device arrays moved while they grew).
	g.devs = nil
	for _, s := range g.objs.Slices {
		for i := range s.Spec.Devices {
			if strings.HasPrefix(s.Spec.Devices[i].Name, "old-") {
				continue
			}
			node := ptr.Deref(s.Spec.NodeName, ptr.Deref(s.Spec.Devices[i].NodeName, ""))
			g.devs = append(g.devs, indepDev{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, node: node, dev: &s.Spec.Devices[i]})
		}
	}
	g.classes()
	g.existing()
	var pending []*resourceapi.ResourceClaim
	for i := 0; i < 3+g.r.IntN(4); i++ {
		pending = append(pending, g.pending())
	}
	return g.objs, pending
}

// indepSliceErrors are the findings of model.Validate that the API server
// would reject (slice-level errors): a generator bug.
func indepSliceErrors(objs *input.Objects) []string {
	fs, err := model.Validate(context.Background(), objs)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, f := range fs {
		if f.Severity != model.SeverityError || strings.Contains(f.Message, "the allocator rejects the whole pool") ||
			strings.Contains(f.Message, "can never be allocated") || strings.Contains(f.Message, "of the same generation says") ||
			strings.Contains(f.Message, "incomplete pool") || strings.Contains(f.Message, "overlaps device") {
			continue
		}
		out = append(out, f.String())
	}
	return out
}

// TestIndependentSingleClaimMatchesUpstream: on instances of the
// independent generator, every pending claim on its own (with the
// instance's existing allocations) is allocated by drasat exactly when the
// upstream allocator (all features on, every node tried, an error on any
// node aborting) allocates it. DRASAT_INDEP_SEEDS=N runs N instances
// (default 60, 15 with -short), DRASAT_INDEP_FIRST=S starts at seed S.
func TestIndependentSingleClaimMatchesUpstream(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	if n, err := strconv.Atoi(os.Getenv("DRASAT_INDEP_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	first := uint64(1)
	if n, err := strconv.ParseUint(os.Getenv("DRASAT_INDEP_FIRST"), 10, 64); err == nil && n > 0 {
		first = n
	}
	var total, feasible, disagree int
	for seed := first; seed < first+uint64(seeds); seed++ {
		base, claims := indepInstance(seed)
		if errs := indepSliceErrors(base); len(errs) > 0 {
			t.Errorf("seed %d: generator produced invalid slices:\n%s", seed, strings.Join(errs, "\n"))
			continue
		}
		for _, c := range claims {
			objs := *base
			objs.Claims = append(slices.Clone(base.Claims), c)
			up, err := baseline.Upstream(context.Background(), &objs, baseline.UpstreamFeatures{Allocator: &allFeatures})
			if err != nil {
				t.Fatalf("Upstream: %v", err)
			}
			dr, err := indepRunDrasat(t, fmt.Sprintf("seed %d, %s: drasat", seed, c.Name), &objs)
			if err != nil {
				t.Errorf("seed %d, %s: drasat: %v", seed, c.Name, err)
				continue
			}
			total++
			upOK, drOK := len(up.Allocated) == 1, len(dr) == 1
			why := ""
			for _, r := range up.Rejected {
				why = r.Reason
			}
			if upOK {
				if w := upstreamErrorsSomewhere(t, fmt.Sprintf("seed %d, %s", seed, c.Name), &objs); w != "" {
					upOK, why = false, w
				}
			}
			if upOK {
				feasible++
				validateAllocations(t, fmt.Sprintf("seed %d, %s: upstream", seed, c.Name), &objs, up.Allocated)
			}
			if upOK != drOK {
				disagree++
				t.Errorf("seed %d, %s: upstream allocates: %v (%s), drasat: %v\nupstream: %v\ndrasat: %v",
					seed, c.Name, upOK, why, drOK, placement(up.Allocated), placement(dr))
			}
		}
	}
	t.Logf("%d single claims on %d instances (seeds %d-%d): %d feasible for upstream, %d disagreements",
		total, seeds, first, first+uint64(seeds)-1, feasible, disagree)
	if seeds >= 10 && (feasible == 0 || feasible == total) {
		t.Errorf("degenerate instances: %d of %d feasible", feasible, total)
	}
}

// indepRunDrasat is runDrasatAs returning drasat's errors, so that a long
// run goes on past one.
func indepRunDrasat(t *testing.T, label string, objs *input.Objects) ([]*resourceapi.ResourceClaim, error) {
	t.Helper()
	p, err := model.Build(context.Background(), objs, model.Options{Compat: model.CompatKEP5963})
	if err != nil {
		return nil, fmt.Errorf("model.Build: %w", err)
	}
	res, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("alloc.Run: %w", err)
	}
	all, err := alloc.Allocated(p, res)
	if err != nil {
		return nil, fmt.Errorf("alloc.Allocated: %w", err)
	}
	var out []*resourceapi.ResourceClaim
	for _, c := range all {
		if c.Status.Allocation != nil {
			out = append(out, c)
		}
	}
	validateAllocations(t, label, objs, out)
	return out, nil
}

// TestIndependentDump prints one instance as YAML, with the pending claim
// named by DRASAT_INDEP_CLAIM, for drasat allocate -f or a fixture:
// DRASAT_INDEP_DUMP=5644 DRASAT_INDEP_CLAIM=claim-5 go test -v -run TestIndependentDump ./bench/
func TestIndependentDump(t *testing.T) {
	seed, err := strconv.ParseUint(os.Getenv("DRASAT_INDEP_DUMP"), 10, 64)
	if err != nil {
		t.Skip("DRASAT_INDEP_DUMP not set")
	}
	base, claims := indepInstance(seed)
	emit := func(apiVersion, kind string, o any) {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("---\napiVersion: %s\nkind: %s\n%s", apiVersion, kind, b)
	}
	for _, n := range base.Nodes {
		emit("v1", "Node", n)
	}
	for _, c := range base.Classes {
		emit("resource.k8s.io/v1", "DeviceClass", c)
	}
	for _, s := range base.Slices {
		emit("resource.k8s.io/v1", "ResourceSlice", s)
	}
	for _, c := range base.Claims {
		emit("resource.k8s.io/v1", "ResourceClaim", c)
	}
	for _, c := range claims {
		if c.Name == os.Getenv("DRASAT_INDEP_CLAIM") {
			emit("resource.k8s.io/v1", "ResourceClaim", c)
		}
	}
}
