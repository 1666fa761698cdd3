package check

import (
	"context"
	"fmt"
	"reflect"
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

func (k devKey) pool() poolKey { return poolKey{k.Driver, k.Pool} }

func keyOf(r *resourceapi.DeviceRequestAllocationResult) devKey {
	return devKey{r.Driver, r.Pool, r.Device}
}

type poolKey struct{ Driver, Pool string }

func (k poolKey) String() string { return k.Driver + "/" + k.Pool }

// pool is one generation of a resource pool, as some node (or, without
// nodes, everybody) uses it. Nodes may use different generations of one
// pool (see nodeGeneration); each gets its own pool value.
type pool struct {
	key         poolKey
	gen         int64
	slices      []*resourceapi.ResourceSlice // the generation's slices, by name
	issue       string                       // why the pool is not usable; "" if usable
	counterSets map[string]*resourceapi.CounterSet
	setNames    []string // sorted
	devices     []*device
	byName      map[string]*device   // the first device of each name
	named       map[string][]*device // every device of each name, by slice name
	// dups: some name is in slices of different nodes (each node sees one
	// of them; upstream checks names among a node's slices only).
	dups bool
}

// device is one device of a pool generation.
type device struct {
	key   devKey
	pool  *pool
	slice *resourceapi.ResourceSlice
	spec  *resourceapi.Device
}

// world is what the checker derives from the slices and nodes.
type world struct {
	pools     map[poolKey]*pool // the highest generation, for lookups without a node
	poolOrder []*pool           // every generation some node uses, by pool then generation
	// perNode is, per node name, the generation of each pool the node
	// uses (usable or not); pools it does not see or ignores are absent.
	perNode    map[string]map[poolKey]*pool
	multi      map[poolKey]bool   // nodes use different generations of the pool
	devices    map[devKey]*device // one device of each name: usable generations first, highest first
	nodes      []*corev1.Node     // the node universe, by name
	nodeByName map[string]*corev1.Node
	selectors  map[*corev1.NodeSelector]*nodeaffinity.NodeSelector
	cel        *dracel.Cache
	celMemo    map[celKey]celOut
	selErr     map[string]bool // anySelectorError per class and selectors
}

// celKey is what a selector's answer depends on: the expression and the
// fields of dracel.Device it is evaluated on. The attribute and capacity
// maps count by identity: the informer's transform makes devices with
// equal maps share one (a MIG placement's attributes are its GPU's and
// its profile's), so the scan of every device for selector errors (rule
// 10) evaluates once per distinct map instead of once per device: 22 s
// cold at 1,000 nodes and 300 claims, the first pass's re-check. Maps read
// from files are each their own; objects are never modified in place.
type celKey struct {
	expr       string
	driver     string
	multi      int8 // allowMultipleAllocations: -1 unset, 0 false, 1 true
	attrs, cap uintptr
}

// celOut is an answer; err is the evaluation's own error, which eval
// names the device in.
type celOut struct {
	ok      bool
	err     error
	compile bool // err is the expression's, not the device's
}

func newWorld(slices []*resourceapi.ResourceSlice, nodes []*corev1.Node) *world {
	w := &world{
		pools:      map[poolKey]*pool{},
		perNode:    map[string]map[poolKey]*pool{},
		multi:      map[poolKey]bool{},
		devices:    map[devKey]*device{},
		nodeByName: map[string]*corev1.Node{},
		selectors:  map[*corev1.NodeSelector]*nodeaffinity.NodeSelector{},
		cel:        dracel.NewCache(1000, dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true}),
		celMemo:    map[celKey]celOut{},
		selErr:     map[string]bool{},
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

// buildPools groups slices into pools and gives every node the generation
// of each pool it uses (nodeGeneration); without nodes the highest
// generation counts. Each generation used is checked for being usable:
// complete (all resourceSliceCount slices present) and valid (unique device
// and counter set names, consumed counter sets and counters exist), as the
// scheduler's GatherPools/buildPool require.
func (w *world) buildPools(slices []*resourceapi.ResourceSlice) {
	byPool := map[poolKey][]*resourceapi.ResourceSlice{}
	var keys []poolKey
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if byPool[k] == nil {
			keys = append(keys, k)
		}
		byPool[k] = append(byPool[k], s)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Driver != keys[j].Driver {
			return keys[i].Driver < keys[j].Driver
		}
		return keys[i].Pool < keys[j].Pool
	})
	for _, k := range keys {
		all := byPool[k]
		built := map[string]*pool{}
		// target: the slices the node sees, among which device names
		// must be unique (nil: all of them).
		get := func(gen int64, of, target []*resourceapi.ResourceSlice) *pool {
			of = append([]*resourceapi.ResourceSlice(nil), of...)
			sort.SliceStable(of, func(i, j int) bool { return of[i].Name < of[j].Name })
			id := fmt.Sprint(gen)
			for _, s := range of {
				id += "/" + s.Name
			}
			if target == nil {
				target = of
			}
			dup := duplicateName(target)
			id += "|" + dup
			if built[id] == nil {
				built[id] = newPool(k, gen, of, dup)
			}
			return built[id]
		}
		highest := all[0].Spec.Pool.Generation
		for _, s := range all {
			highest = max(highest, s.Spec.Pool.Generation)
		}
		w.pools[k] = get(highest, generation(all, highest), nil)
		for _, n := range w.nodes {
			gen, of, target, ok := w.nodeGeneration(all, n)
			if !ok {
				continue
			}
			if w.perNode[n.Name] == nil {
				w.perNode[n.Name] = map[poolKey]*pool{}
			}
			w.perNode[n.Name][k] = get(gen, of, target)
		}
		var gens []*pool
		for _, pl := range built {
			gens = append(gens, pl)
		}
		sort.Slice(gens, func(i, j int) bool {
			if gens[i].gen != gens[j].gen {
				return gens[i].gen > gens[j].gen
			}
			return gens[i].slices[0].Name < gens[j].slices[0].Name
		})
		for _, pl := range gens {
			if len(gens) > 1 || pl.dups && pl.issue == "" {
				w.multi[k] = true // devices are read per node
			}
		}
		// Lookups by name alone (existing allocations) prefer a usable
		// generation, the highest first.
		for _, usable := range []bool{true, false} {
			for _, pl := range gens {
				for _, d := range pl.devices {
					if w.devices[d.key] == nil && (pl.issue == "") == usable {
						w.devices[d.key] = d
					}
				}
			}
		}
		for i := len(gens) - 1; i >= 0; i-- {
			if len(w.nodes) == 0 && gens[i] != w.pools[k] {
				continue
			}
			w.poolOrder = append(w.poolOrder, gens[i])
		}
	}
	// poolOrder holds the generations in use: the highest without nodes,
	// else those some node uses.
	kept := w.poolOrder[:0]
	used := map[*pool]bool{}
	for _, m := range w.perNode {
		for _, pl := range m {
			used[pl] = true
		}
	}
	for _, pl := range w.poolOrder {
		if len(w.nodes) == 0 || used[pl] {
			kept = append(kept, pl)
		}
	}
	w.poolOrder = kept
}

// generation returns the slices of generation gen.
func generation(all []*resourceapi.ResourceSlice, gen int64) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, s := range all {
		if s.Spec.Pool.Generation == gen {
			out = append(out, s)
		}
	}
	return out
}

// duplicateName is a device name given twice among the device slices of
// target ("" if none), as upstream's validateDeviceNames finds it among the
// slices published for a node (slices with sharedCounters hold counter
// sets, their devices are not looked at).
func duplicateName(target []*resourceapi.ResourceSlice) string {
	seen := map[string]bool{}
	for _, s := range target {
		if len(s.Spec.SharedCounters) > 0 {
			continue
		}
		for _, d := range s.Spec.Devices {
			if seen[d.Name] {
				return d.Name
			}
			seen[d.Name] = true
		}
	}
	return ""
}

// newPool builds one generation of a pool and records why it is not
// usable, if it is not; dup is a device name the slices of the node using
// it give twice ("" if none).
func newPool(k poolKey, gen int64, slices []*resourceapi.ResourceSlice, dup string) *pool {
	p := &pool{key: k, gen: gen, slices: slices, counterSets: map[string]*resourceapi.CounterSet{}, byName: map[string]*device{}, named: map[string][]*device{}}
	var issues []string
	if dup != "" {
		issues = append(issues, fmt.Sprintf("invalid: duplicate device name %s", dup))
	}
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
	for _, s := range p.slices {
		for i := range s.Spec.Devices {
			spec := &s.Spec.Devices[i]
			d := &device{key: devKey{k.Driver, k.Pool, spec.Name}, pool: p, slice: s, spec: spec}
			p.devices = append(p.devices, d)
			if p.byName[spec.Name] == nil {
				p.byName[spec.Name] = d
			} else {
				p.dups = true
			}
			p.named[spec.Name] = append(p.named[spec.Name], d)
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
	return p
}

// nodeGeneration is the generation of a pool that node n uses, with its
// slices, as upstream's GatherPools decides it per node: among the slices
// published for n (its own node-local ones first), the highest generation;
// if those slices alone are a complete set, that is it. If not, a newer
// generation anywhere means the driver is replacing this one: n ignores the
// pool (not ok). Otherwise all slices of that generation form the pool,
// complete or not. Not ok, too, when n sees no slice of the pool.
func (w *world) nodeGeneration(all []*resourceapi.ResourceSlice, n *corev1.Node) (gen int64, of, target []*resourceapi.ResourceSlice, ok bool) {
	var mine []*resourceapi.ResourceSlice
	for _, local := range []bool{true, false} {
		for _, s := range all {
			if (deref(s.Spec.NodeName) != "") == local && w.sliceRelevant(s, n) {
				mine = append(mine, s)
			}
		}
	}
	if len(mine) == 0 {
		return 0, nil, nil, false
	}
	top := mine[0].Spec.Pool.Generation
	for _, s := range mine {
		top = max(top, s.Spec.Pool.Generation)
	}
	seen := generation(mine, top)
	if int64(len(seen)) == seen[0].Spec.Pool.ResourceSliceCount {
		return top, seen, seen, true
	}
	for _, s := range all {
		if s.Spec.Pool.Generation > top {
			return 0, nil, nil, false
		}
	}
	return top, generation(all, top), seen, true
}

// view is the generation of pool k that node n uses (nil when it uses
// none); without known nodes, or for a node not among them, the highest.
func (w *world) view(n *corev1.Node, k poolKey) *pool {
	if n != nil && len(w.nodes) > 0 {
		if _, known := w.nodeByName[n.Name]; known {
			return w.perNode[n.Name][k]
		}
	}
	return w.pools[k]
}

// entryOn is the device of that name in pool generation pl that node n
// sees (nil node: the first), nil if none; one name may be in the slices
// of several nodes.
func (w *world) entryOn(pl *pool, name string, n *corev1.Node) *device {
	for _, d := range pl.named[name] {
		if n == nil || !pl.dups || w.sliceRelevant(d.slice, n) {
			return d
		}
	}
	return nil
}

// viewsOf lists the pool generations node n uses, in pool order.
func (w *world) viewsOf(n *corev1.Node) []*pool {
	var out []*pool
	for _, pl := range w.poolOrder {
		if v := w.view(n, pl.key); v == pl {
			out = append(out, pl)
		}
	}
	return out
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
	k := celKey{expr: expr, driver: d.key.Driver, multi: -1,
		attrs: reflect.ValueOf(d.spec.Attributes).Pointer(), cap: reflect.ValueOf(d.spec.Capacity).Pointer()}
	if m := d.spec.AllowMultipleAllocations; m != nil {
		k.multi = 0
		if *m {
			k.multi = 1
		}
	}
	out, known := w.celMemo[k]
	if !known {
		res := w.cel.GetOrCompile(expr)
		if res.Error != nil {
			out.err, out.compile = fmt.Errorf("compile error: %s", res.Error.Detail), true
		} else {
			ok, _, err := res.DeviceMatches(context.Background(), dracel.Device{
				Driver:                   d.key.Driver,
				AllowMultipleAllocations: d.spec.AllowMultipleAllocations,
				Attributes:               d.spec.Attributes,
				Capacity:                 d.spec.Capacity,
			})
			if err != nil {
				out.err = fmt.Errorf("runtime error: %w", dracel.EnhanceRuntimeError(err))
			}
			out.ok = ok && err == nil
		}
		w.celMemo[k] = out
	}
	switch {
	case out.err == nil:
		return out.ok, nil
	case out.compile:
		return false, fmt.Errorf("CEL expression %q: %w", expr, out.err)
	default:
		return false, fmt.Errorf("CEL expression %q on device %s: %w", expr, d.key, out.err)
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
