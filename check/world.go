package check

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/draoptionalnodeoperations"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// devKey names a device as allocation results do.
type devKey struct{ Driver, Pool, Device string }

func (k devKey) String() string { return k.Driver + "/" + k.Pool + "/" + k.Device }

func keyOf(r *resourceapi.DeviceRequestAllocationResult) devKey {
	return devKey{r.Driver, r.Pool, r.Device}
}

type poolKey struct{ Driver, Pool string }

func (k poolKey) String() string { return k.Driver + "/" + k.Pool }

// pool is the highest generation of one resource pool.
type pool struct {
	key         poolKey
	slices      []*resourceapi.ResourceSlice // highest generation, by name
	issue       string                       // why the pool is not usable; "" if usable
	counterSets map[string]*resourceapi.CounterSet
	setNames    []string // sorted
	devices     []*device
}

// device is one device of a pool's highest generation.
type device struct {
	key   devKey
	pool  *pool
	slice *resourceapi.ResourceSlice
	spec  *resourceapi.Device
}

// world is what the checker derives from the slices and nodes.
type world struct {
	pools      map[poolKey]*pool
	poolOrder  []*pool
	devices    map[devKey]*device // first device of each name in each pool
	nodes      []*corev1.Node     // the node universe, by name
	nodeByName map[string]*corev1.Node
	selectors  map[*corev1.NodeSelector]*nodeaffinity.NodeSelector
	cel        *dracel.Cache
	celMemo    map[celKey]celOut
}

type celKey struct {
	expr string
	dev  devKey
}

type celOut struct {
	ok  bool
	err error
}

func newWorld(slices []*resourceapi.ResourceSlice, nodes []*corev1.Node) *world {
	w := &world{
		pools:      map[poolKey]*pool{},
		devices:    map[devKey]*device{},
		nodeByName: map[string]*corev1.Node{},
		selectors:  map[*corev1.NodeSelector]*nodeaffinity.NodeSelector{},
		cel:        dracel.NewCache(1000, dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true}),
		celMemo:    map[celKey]celOut{},
	}
	w.buildNodes(slices, nodes)
	w.buildPools(slices)
	return w
}

// taintedSlices adds the taints of DeviceTaintRules to the devices they
// select, as the scheduler's ResourceSlice tracker does: no deviceSelector
// selects nothing, each of driver, pool and device that is set must match.
// Patched slices are copies.
func taintedSlices(slices []*resourceapi.ResourceSlice, rules []*resourceapi.DeviceTaintRule) []*resourceapi.ResourceSlice {
	out := slices
	copied := false
	for i, s := range slices {
		var cp *resourceapi.ResourceSlice
		for _, r := range rules {
			sel := r.Spec.DeviceSelector
			if sel == nil {
				continue
			}
			if (sel.Driver != nil && *sel.Driver != s.Spec.Driver) || (sel.Pool != nil && *sel.Pool != s.Spec.Pool.Name) {
				continue
			}
			for j, d := range s.Spec.Devices {
				if sel.Device != nil && *sel.Device != d.Name {
					continue
				}
				if cp == nil {
					cp = s.DeepCopy()
					if !copied {
						out, copied = append([]*resourceapi.ResourceSlice(nil), slices...), true
					}
					out[i] = cp
				}
				cp.Spec.Devices[j].Taints = append(cp.Spec.Devices[j].Taints, r.Spec.Taint)
			}
		}
	}
	return out
}

// buildPools keeps each pool's highest generation and records whether the
// pool is usable: complete (all resourceSliceCount slices present) and valid
// (unique device and counter set names, consumed counter sets and counters
// exist), as the scheduler's GatherPools/buildPool require.
func (w *world) buildPools(slices []*resourceapi.ResourceSlice) {
	byPool := map[poolKey][]*resourceapi.ResourceSlice{}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		byPool[k] = append(byPool[k], s)
	}
	for k, all := range byPool {
		gen := all[0].Spec.Pool.Generation
		for _, s := range all {
			gen = max(gen, s.Spec.Pool.Generation)
		}
		gen = w.generationSeenByNodes(all, gen)
		p := &pool{key: k, counterSets: map[string]*resourceapi.CounterSet{}}
		for _, s := range all {
			if s.Spec.Pool.Generation == gen {
				p.slices = append(p.slices, s)
			}
		}
		sort.SliceStable(p.slices, func(i, j int) bool { return p.slices[i].Name < p.slices[j].Name })
		var issues []string
		for _, s := range p.slices {
			if s.Spec.Pool.ResourceSliceCount != int64(len(p.slices)) {
				issues = append(issues, fmt.Sprintf("incomplete: generation %d has %d slices, slice %s says resourceSliceCount %d",
					gen, len(p.slices), s.Name, s.Spec.Pool.ResourceSliceCount))
				break
			}
		}
		for _, s := range p.slices {
			for i := range s.Spec.SharedCounters {
				cs := &s.Spec.SharedCounters[i]
				if _, dup := p.counterSets[cs.Name]; dup {
					issues = append(issues, fmt.Sprintf("invalid: duplicate counter set name %s", cs.Name))
					continue
				}
				p.counterSets[cs.Name] = cs
				p.setNames = append(p.setNames, cs.Name)
			}
		}
		sort.Strings(p.setNames)
		seen := map[string]bool{}
		for _, s := range p.slices {
			for i := range s.Spec.Devices {
				spec := &s.Spec.Devices[i]
				if seen[spec.Name] {
					issues = append(issues, fmt.Sprintf("invalid: duplicate device name %s", spec.Name))
					continue
				}
				seen[spec.Name] = true
				d := &device{key: devKey{k.Driver, k.Pool, spec.Name}, pool: p, slice: s, spec: spec}
				p.devices = append(p.devices, d)
				w.devices[d.key] = d
				for _, cc := range spec.ConsumesCounters {
					cs := p.counterSets[cc.CounterSet]
					if cs == nil {
						issues = append(issues, fmt.Sprintf("invalid: device %s consumes from counter set %s, which does not exist", spec.Name, cc.CounterSet))
						continue
					}
					for name := range cc.Counters {
						if _, ok := cs.Counters[name]; !ok {
							issues = append(issues, fmt.Sprintf("invalid: device %s consumes counter %s, which counter set %s does not have", spec.Name, name, cc.CounterSet))
						}
					}
				}
			}
		}
		sort.Strings(issues)
		if len(issues) > 3 {
			issues = append(issues[:3], fmt.Sprintf("and %d more", len(issues)-3))
		}
		p.issue = strings.Join(issues, "; ")
		w.pools[k] = p
		w.poolOrder = append(w.poolOrder, p)
	}
	sort.Slice(w.poolOrder, func(i, j int) bool {
		a, b := w.poolOrder[i].key, w.poolOrder[j].key
		if a.Driver != b.Driver {
			return a.Driver < b.Driver
		}
		return a.Pool < b.Pool
	})
}

// generationSeenByNodes: upstream's GatherPools looks at a pool per node,
// through the slices published for that node, at their highest generation.
// If those form a complete generation (all resourceSliceCount slices) it is
// used even when another node sees a newer one; if not and a newer one
// exists, the node ignores the pool. The checker takes the older generation
// only when every node that sees the pool uses that same one.
func (w *world) generationSeenByNodes(all []*resourceapi.ResourceSlice, highest int64) int64 {
	used := map[int64]bool{}
	for _, n := range w.nodes {
		perGen := map[int64]int64{}
		top := int64(-1)
		for _, s := range all {
			if w.sliceRelevant(s, n) {
				perGen[s.Spec.Pool.Generation]++
				top = max(top, s.Spec.Pool.Generation)
			}
		}
		if top < 0 {
			continue
		}
		var want int64
		for _, s := range all {
			if s.Spec.Pool.Generation == top {
				want = s.Spec.Pool.ResourceSliceCount
				break
			}
		}
		if top < highest && perGen[top] != want {
			continue // ignored on this node
		}
		used[top] = true
	}
	if len(used) == 1 {
		for g := range used {
			return g
		}
	}
	return highest
}

// buildNodes fixes the node universe: the Node objects, or when there are
// none the node names that slices and devices mention (without labels).
func (w *world) buildNodes(slices []*resourceapi.ResourceSlice, nodes []*corev1.Node) {
	if len(nodes) > 0 {
		w.nodes = append(w.nodes, nodes...)
	} else {
		seen := map[string]bool{}
		add := func(name *string) {
			if name != nil && *name != "" && !seen[*name] {
				seen[*name] = true
				w.nodes = append(w.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: *name}})
			}
		}
		for _, s := range slices {
			add(s.Spec.NodeName)
			for i := range s.Spec.Devices {
				add(s.Spec.Devices[i].NodeName)
			}
		}
	}
	sort.SliceStable(w.nodes, func(i, j int) bool { return w.nodes[i].Name < w.nodes[j].Name })
	for _, n := range w.nodes {
		if _, ok := w.nodeByName[n.Name]; !ok {
			w.nodeByName[n.Name] = n
		}
	}
}

// usable returns the device if it exists in a usable pool.
func (w *world) usable(k devKey) *device {
	d := w.devices[k]
	if d == nil || d.pool.issue != "" {
		return nil
	}
	return d
}

// nodeSpec returns how a device selects nodes: from the device itself under
// perDeviceNodeSelection, else from its slice.
func nodeSpec(d *device) (nodeName string, sel *corev1.NodeSelector, all bool) {
	if ptrTrue(d.slice.Spec.PerDeviceNodeSelection) {
		return deref(d.spec.NodeName), d.spec.NodeSelector, ptrTrue(d.spec.AllNodes)
	}
	return deref(d.slice.Spec.NodeName), d.slice.Spec.NodeSelector, ptrTrue(d.slice.Spec.AllNodes)
}

// nodeLocal tells whether allocating the device pins the claim to one node:
// it comes from a node-local slice (or device) or binds to its node.
func nodeLocal(d *device) bool {
	name, _, _ := nodeSpec(d)
	return name != "" || ptrTrue(d.spec.BindsToNode)
}

// availableEverywhere tells whether the device is published for all nodes.
func availableEverywhere(d *device) bool {
	name, sel, all := nodeSpec(d)
	return name == "" && all && sel == nil
}

// reach tells whether the device can be used from node n, as the
// scheduler's NodeMatches does.
func (w *world) reach(d *device, n *corev1.Node) (bool, error) {
	name, sel, all := nodeSpec(d)
	switch {
	case name != "":
		return n != nil && n.Name == name, nil
	case all:
		return true, nil
	case sel != nil:
		return w.matchNode(sel, n)
	}
	return false, nil
}

// allocatable is reach, and for a slice with skipNodeOperations also that
// the node declares DRAOptionalNodeOperations in status.declaredFeatures
// (upstream's allocator requires it). allocationMode All still counts such
// a device on other nodes (reach), so All fails there.
func (w *world) allocatable(d *device, n *corev1.Node) (bool, error) {
	ok, err := w.reach(d, n)
	if !ok || err != nil || len(d.slice.Spec.SkipNodeOperations) == 0 {
		return ok, err
	}
	return n != nil && slices.Contains(n.Status.DeclaredFeatures, draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate), nil
}

// sliceRelevant tells whether any part of slice s is published for node n.
func (w *world) sliceRelevant(s *resourceapi.ResourceSlice, n *corev1.Node) bool {
	if ptrTrue(s.Spec.PerDeviceNodeSelection) {
		for i := range s.Spec.Devices {
			d := &device{slice: s, spec: &s.Spec.Devices[i]}
			if ok, _ := w.reach(d, n); ok {
				return true
			}
		}
		return false
	}
	ok, _ := w.reach(&device{slice: s, spec: &resourceapi.Device{}}, n)
	return ok
}

func (w *world) matchNode(sel *corev1.NodeSelector, n *corev1.Node) (bool, error) {
	if n == nil {
		return false, nil
	}
	ns, ok := w.selectors[sel]
	if !ok {
		var err error
		ns, err = nodeaffinity.NewNodeSelector(sel)
		if err != nil {
			return false, fmt.Errorf("node selector %s: %w", sel.String(), err)
		}
		w.selectors[sel] = ns
	}
	return ns.Match(n), nil
}

// eval evaluates a CEL selector-style expression with the device as
// `device`, using the scheduler's CEL package.
func (w *world) eval(expr string, d *device) (bool, error) {
	k := celKey{expr, d.key}
	if out, ok := w.celMemo[k]; ok {
		return out.ok, out.err
	}
	var out celOut
	res := w.cel.GetOrCompile(expr)
	if res.Error != nil {
		out.err = fmt.Errorf("CEL expression %q: compile error: %s", expr, res.Error.Detail)
	} else {
		ok, _, err := res.DeviceMatches(context.Background(), dracel.Device{
			Driver:                   d.key.Driver,
			AllowMultipleAllocations: d.spec.AllowMultipleAllocations,
			Attributes:               d.spec.Attributes,
			Capacity:                 d.spec.Capacity,
		})
		if err != nil {
			out.err = fmt.Errorf("CEL expression %q on device %s: runtime error: %w", expr, d.key, dracel.EnhanceRuntimeError(err))
		}
		out.ok = ok && err == nil
	}
	w.celMemo[k] = out
	return out.ok, out.err
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
