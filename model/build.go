package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"k8s.io/klog/v2"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
	"unsafe"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/draoptionalnodeoperations"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// WeightAnnotation sets a claim's weight for the max-claims objective.
const WeightAnnotation = "drasat.dev/weight"

// MaxWeight bounds claim weights so objective sums stay small.
const MaxWeight = 1000

// Build derives the allocation problem from the objects. It fails on input
// that cannot mean anything (bad weights, unknown compat mode), and when
// ctx is cancelled first (Ctrl-C; the evaluation of CEL selectors stops
// with it): then no problem is returned, never a partial one. Claims that
// cannot be served carry their reason in Claim.Err, among them the claims
// whose CEL selectors were not evaluated within the build's budget: the
// CEL cost all selectors may spend together (Options.CELCost) and ctx's
// deadline (--timeout), past which no selector is evaluated any more.
//
// The build is logged through the context's logger at verbosity 1.
func Build(ctx context.Context, objs *input.Objects, opts Options) (*Problem, error) {
	start := time.Now()
	p, err := build(ctx, objs, opts)
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("building the problem (evaluating selectors) stopped: %w", context.Cause(ctx))
	}
	if logger := klog.FromContext(ctx); err == nil && logger.V(1).Enabled() {
		logger.V(1).Info("problem built", "took", time.Since(start), "devices", len(p.Devices), "claims", len(p.Claims), "nodes", len(p.Nodes), "celCost", p.CELCost)
	}
	return p, err
}

func build(ctx context.Context, objs *input.Objects, opts Options) (p *Problem, err error) {
	if err := CheckCompat(opts.Compat); err != nil {
		return nil, err
	}
	if opts.Memo != nil {
		opts.Memo.begin()
		defer func() { opts.Memo.end(err == nil && ctx.Err() == nil) }()
	}
	if opts.Compat == "" {
		opts.Compat = CompatKEP5963
	}
	b := &builder{objs: objs, p: &Problem{Options: opts, nodesByClass: &classNodes{m: map[string][]int{}}, locality: &locality{}}, cel: newCELEnv(ctx, opts.CELCost),
		deviceByID: map[input.DeviceID][]int{}, matchCache: map[string]matchResult{}, lookedUp: map[string]bool{}, setByName: map[[3]string]int{}, nodeByName: map[string]int{}}
	b.cel.memo = opts.Memo
	b.buildNodes()
	nodeObjs := make([]*corev1.Node, len(b.p.Nodes))
	for i, n := range b.p.Nodes {
		nodeObjs[i] = n.Obj
	}
	// A node selector that does not parse is an error for the allocator
	// (it cannot tell which nodes see the slice): the run fails, naming it.
	if err := b.checkNodeSelectors(); err != nil {
		return nil, err
	}
	pools, issues := opts.Memo.usablePools(input.ApplyTaintRules(objs.Slices, objs.TaintRules), nodeObjs)
	b.p.Issues = issues
	if err := b.buildPools(pools); err != nil {
		return nil, err
	}
	b.applyExisting()
	b.markOverdrawnPools()
	b.separateGenerations()
	if err := b.buildCompatibleOnlyWith(); err != nil {
		return nil, err
	}
	if err := b.buildClaims(); err != nil {
		return nil, err
	}
	b.buildPods()
	b.scaleCapacities()
	b.separateDuplicateNames()
	outcomes := map[*Claim]*searchOutcome{}
	for _, c := range b.p.Claims {
		if c.Err == nil {
			c.Err = b.resultLimitError(c)
		}
		if c.Err == nil {
			var err error
			if outcomes[c], err = b.searchOrderError(c); err != nil {
				// Failed from the existing allocations alone: with
				// other claims placed first it may not (PlaceLast).
				c.unheld = saveUnheld(c)
				c.unheld.err, c.Err = err, err
			}
		}
	}
	for _, c := range b.p.Claims {
		if out := outcomes[c]; out != nil && c.Err == nil {
			c.unheld = saveUnheld(c)
			c.Err = b.holdOrdered(c, out)
		}
	}
	b.podNodeConflicts()
	b.p.searchLate = b.lateDevices()
	b.p.CELCost = b.cel.spent
	return b.p, nil
}

type builder struct {
	objs       *input.Objects
	p          *Problem
	cel        *celEnv
	deviceByID map[input.DeviceID][]int // several when nodes use different generations of a pool
	copies     []poolCopy
	copyOf     []int // device -> its pool copy (generation)
	setCopy    []int // counter set -> its pool copy
	setByName  map[[3]string]int
	nodeByName map[string]int
	classes    map[string]*resourceapi.DeviceClass
	matchCache map[string]matchResult
	celWalks   map[string]*celMatch // celWalk's, by class and selectors
	// attrCache is every constraint's table of an attribute's values
	// (AttributeValues: one per attribute, shared by all claims).
	// lookedUp marks the constraints whose candidates' values are in the
	// table already: the same attribute of the same candidate lists
	// (matchCache shares identical alternatives' lists), so that claims
	// of one spec do not walk tens of thousands of candidates each.
	attrCache map[string]AttributeValues
	lookedUp  map[string]bool
	// existingCap sums the consumedCapacity of existing shares per device;
	// altCaps are the alternatives' capacity consumptions, scaled at the end.
	existingCap map[int]map[resourceapi.QualifiedName]resource.Quantity
	altCaps     []*altCapacity
	uses        int64 // counterUses, once computed
	sliceNodes  map[*resourceapi.ResourceSlice][]int
	late        []bool                                // lateDevices, once computed
	ordered     []*Claim                              // claims whose outcome depends on the search order, once computed
	claimObjs   map[string]*resourceapi.ResourceClaim // input claims by namespace/name, once needed (pods.go)
}

// attributeTable is the problem's table of attribute name's values, one
// entry per device, nil until looked up.
func (b *builder) attributeTable(name string) AttributeValues {
	if b.attrCache == nil {
		b.attrCache = map[string]AttributeValues{}
	}
	vals := b.attrCache[name]
	if vals == nil {
		vals = make(AttributeValues, len(b.p.Devices))
		b.attrCache[name] = vals
	}
	return vals
}

func (b *builder) origin(kind, ns, name string) string {
	id := kind + " " + name
	if ns != "" {
		id = kind + " " + ns + "/" + name
	}
	if o := b.objs.Origin[id]; o != "" {
		return o + ": " + id
	}
	return id
}

// buildNodes fixes the node universe: the Node objects when given, else the
// nodes that slices and devices name. Nodes are in name order, as the
// scheduler tries them.
func (b *builder) buildNodes() {
	if len(b.objs.Nodes) > 0 {
		for _, n := range b.objs.Nodes {
			b.p.Nodes = append(b.p.Nodes, Node{Name: n.Name, Obj: n})
		}
	} else {
		seen := map[string]bool{}
		add := func(name *string) {
			if name != nil && *name != "" && !seen[*name] {
				seen[*name] = true
				b.p.Nodes = append(b.p.Nodes, Node{Name: *name, Obj: &corev1.Node{ObjectMeta: metaName(*name)}})
			}
		}
		for _, s := range b.objs.Slices {
			add(s.Spec.NodeName)
			for i := range s.Spec.Devices {
				add(s.Spec.Devices[i].NodeName)
			}
		}
	}
	sort.SliceStable(b.p.Nodes, func(i, j int) bool { return b.p.Nodes[i].Name < b.p.Nodes[j].Name })
	for i, n := range b.p.Nodes {
		b.nodeByName[n.Name] = i
	}
}

// counterUses bounds how often one device's counter consumption can count:
// its holder, and each pending claim with admin access (which, as upstream,
// consumes the counters of a device even when it is held).
func (b *builder) counterUses() int64 {
	if b.uses > 0 {
		return b.uses
	}
	uses := int64(1)
	for _, c := range b.objs.Claims {
		if c.Status.Allocation != nil {
			continue
		}
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly != nil && r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
				uses++
				break
			}
		}
	}
	b.uses = uses
	return uses
}

func (b *builder) buildPools(copies []poolCopy) error {
	b.copies, b.copyOf, b.setCopy = copies, nil, nil
	for ci, pc := range copies {
		slices := pc.slices
		driver, pool := slices[0].Spec.Driver, slices[0].Spec.Pool.Name
		// The scaling of an unchanged pool is the memo's (Options.Memo);
		// a new one is recorded for the next build.
		ps := b.cel.memo.pool(slices, b.counterUses())
		if ps == nil {
			ps = scalePool(slices, b.counterUses())
			b.cel.memo.putPool(ps)
		}
		if ps.fitErr != nil {
			// Too large for exact integer arithmetic: this pool is left
			// out (with a warning), the rest of the run goes on.
			b.p.Issues = append(b.p.Issues, PoolIssue{Driver: driver, Pool: pool, Reason: ps.fitErr.Error(), TooLarge: slices})
			continue
		}
		// Counter sets first, so devices can refer to them: in scalePool's
		// order, which its capacities and units follow.
		setOf := make(map[string]*CounterSet, len(ps.sets))
		for si, name := range ps.sets {
			// The names are shared with the memo and other builds: read only.
			set := &CounterSet{Index: len(b.p.CounterSets), Driver: driver, Pool: pool, Name: name, Counters: ps.counters[si]}
			set.Capacity = append([]int64(nil), ps.capacity[si]...)
			set.Unit = append([]string(nil), ps.unit[si]...)
			set.Free = append([]int64(nil), set.Capacity...)
			setOf[name] = set
			b.setCopy = append(b.setCopy, ci)
			b.setByName[[3]string{driver, pool, name}] = set.Index
			b.p.CounterSets = append(b.p.CounterSets, set)
		}
		k := 0 // consumption, in ps.consumes
		for _, s := range slices {
			for i := range s.Spec.Devices {
				spec := &s.Spec.Devices[i]
				d := &Device{Index: len(b.p.Devices), ID: input.DeviceID{Driver: driver, Pool: pool, Device: spec.Name}, Slice: s, Spec: spec}
				d.MultiAlloc = spec.AllowMultipleAllocations != nil && *spec.AllowMultipleAllocations
				d.BindsToNode = spec.BindsToNode != nil && *spec.BindsToNode
				if err := b.reach(d); err != nil {
					return fmt.Errorf("%s: device %s: %w", b.origin("ResourceSlice", "", s.Name), spec.Name, err)
				}
				restrictToNodes(d, pc.nodes)
				if err := b.deviceCapacity(d); err != nil {
					return fmt.Errorf("%s: device %s: %w", b.origin("ResourceSlice", "", s.Name), spec.Name, err)
				}
				b.deviceByID[d.ID] = append(b.deviceByID[d.ID], d.Index)
				b.copyOf = append(b.copyOf, ci)
				b.p.Devices = append(b.p.Devices, d)
				for _, cc := range spec.ConsumesCounters {
					set := setOf[cc.CounterSet]
					// Shared with the memo and other builds: read only.
					d.Consumes = append(d.Consumes, Consumption{Set: set.Index, Groups: cc.CompatibilityGroups, Amounts: ps.consumes[k]})
					k++
					set.Devices = append(set.Devices, d.Index)
				}
			}
		}
	}
	b.linkGenerations()
	return nil
}

// checkNodeSelectors parses every slice's and device's node selector.
func (b *builder) checkNodeSelectors() error {
	for _, s := range b.objs.Slices {
		if sel := s.Spec.NodeSelector; sel != nil {
			if _, err := nodeaffinity.NewNodeSelector(sel); err != nil {
				return fmt.Errorf("%s: field spec.nodeSelector: %w", b.origin("ResourceSlice", "", s.Name), err)
			}
		}
		for i := range s.Spec.Devices {
			if sel := s.Spec.Devices[i].NodeSelector; sel != nil {
				if _, err := nodeaffinity.NewNodeSelector(sel); err != nil {
					return fmt.Errorf("%s: device %s: field nodeSelector: %w", b.origin("ResourceSlice", "", s.Name), s.Spec.Devices[i].Name, err)
				}
			}
		}
	}
	return nil
}

// restrictToNodes limits a device of a pool generation to the nodes that
// use that generation (nil: no limit).
func restrictToNodes(d *Device, nodes []int) {
	if nodes == nil {
		return
	}
	if d.All {
		d.All, d.Reach = false, slices.Clone(nodes)
	} else {
		d.Reach = slices.DeleteFunc(d.Reach, func(n int) bool { return !slices.Contains(nodes, n) })
	}
	if d.Sees != nil {
		d.Sees = slices.DeleteFunc(d.Sees, func(n int) bool { return !slices.Contains(nodes, n) })
	}
}

// linkGenerations ties together the copies of one device that different
// generations of its pool give (nodes using different generations). The
// scheduler's allocated state knows devices by driver, pool and name only,
// so whatever generation a claim took a device from, every generation
// counts it as allocated: the copies exclude each other.
func (b *builder) linkGenerations() {
	if len(b.deviceByID) == len(b.p.Devices) {
		return // every name once
	}
	for _, first := range b.p.Devices {
		idxs := b.deviceByID[first.ID]
		if len(idxs) < 2 || idxs[0] != first.Index {
			continue // once per device name, in device order (determinism)
		}
		for _, d := range idxs {
			for _, o := range idxs {
				if o != d {
					b.p.Devices[d].Incompatible = append(b.p.Devices[d].Incompatible, o)
				}
			}
		}
	}
}

// separateGenerations: a node checks the counters of the generation it
// uses, counting every allocated device name the generation has, with
// what it says that device consumes. So a device newly allocated from one
// generation that consumes counters in another generation must not meet a
// new counter consumer of that other generation: otherwise the claims
// would be valid only if the scheduler took them in one particular order.
// Such pairs exclude each other (devices already in use are left out:
// they are charged to every generation that has them).
func (b *builder) separateGenerations() {
	gens := map[poolKey][]int{} // pool -> copies
	for c, cp := range b.copies {
		k := poolKey{cp.slices[0].Spec.Driver, cp.slices[0].Spec.Pool.Name}
		gens[k] = append(gens[k], c)
	}
	if len(b.deviceByID) == len(b.p.Devices) {
		return // one generation of every pool: nothing to separate
	}
	byCopy := map[int][]int{}
	for d, c := range b.copyOf {
		byCopy[c] = append(byCopy[c], d)
	}
	for _, d := range b.p.Devices {
		if d.InUse {
			continue
		}
		for _, o := range b.deviceByID[d.ID] {
			if o == d.Index || len(b.p.Devices[o].Consumes) == 0 {
				continue
			}
			// d's name consumes counters in o's generation: d excludes
			// that generation's new counter consumers.
			same := b.copyOf[o] == b.copyOf[d.Index]
			for _, e := range byCopy[b.copyOf[o]] {
				dev := b.p.Devices[e]
				if e == o || e == d.Index || dev.InUse || len(dev.Consumes) == 0 {
					continue
				}
				if same || dev.ID == d.ID {
					continue // see separateDuplicateNames
				}
				d.Incompatible = append(d.Incompatible, e)
				dev.Incompatible = append(dev.Incompatible, d.Index)
				d.OrderExclusive = append(d.OrderExclusive, e)
				dev.OrderExclusive = append(dev.OrderExclusive, d.Index)
			}
		}
	}
	for _, d := range b.p.Devices {
		sort.Ints(d.Incompatible)
		d.Incompatible = slices.Compact(d.Incompatible)
		sort.Ints(d.OrderExclusive)
		d.OrderExclusive = slices.Compact(d.OrderExclusive)
	}
}

// separateDuplicateNames: where one device name is in the slices of
// several nodes of one pool generation (valid on each, see poolInvalid),
// an allocated name consumes for every one of them, while the claim that
// allocates it is checked with its own device's consumption. So only the
// claim the scheduler places last may take such a name with counters
// without the others counting for it: when two pending claims could take
// such names, a device of one excludes the devices of the other such names
// (OrderExclusive: within one claim they go together, as the scheduler's
// search sees them). Devices whose names are once in the generation need
// nothing: the claims taking them may come first.
func (b *builder) separateDuplicateNames() {
	byCopy := map[int][]int{} // copy -> devices whose name it has twice, with counters
	for _, d := range b.p.Devices {
		if !d.InUse && len(d.Consumes) > 0 && b.duplicated(d.Index) {
			byCopy[b.copyOf[d.Index]] = append(byCopy[b.copyOf[d.Index]], d.Index)
		}
	}
	for _, devs := range byCopy {
		slices.Sort(devs)
		rivals := 0
		for _, c := range b.p.Claims {
			if c.Err == nil && c.hasCandidate(devs) {
				rivals++
			}
		}
		if rivals < 2 {
			continue // a claim alone is checked as the scheduler checks it
		}
		for _, d := range devs {
			for _, e := range devs {
				dd, de := b.p.Devices[d], b.p.Devices[e]
				if dd.ID == de.ID {
					continue // copies of one name exclude each other anyway
				}
				dd.Incompatible = append(dd.Incompatible, e)
				dd.OrderExclusive = append(dd.OrderExclusive, e)
			}
		}
		for _, d := range devs {
			dev := b.p.Devices[d]
			sort.Ints(dev.Incompatible)
			dev.Incompatible = slices.Compact(dev.Incompatible)
			sort.Ints(dev.OrderExclusive)
			dev.OrderExclusive = slices.Compact(dev.OrderExclusive)
		}
	}
}

// hasCandidate tells whether one of devs (sorted) can serve a request of c.
func (c *Claim) hasCandidate(devs []int) bool {
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			for _, d := range a.Candidates {
				if _, ok := slices.BinarySearch(devs, d); ok {
					return true
				}
			}
		}
	}
	return false
}

// duplicated tells whether device d's name is twice in its generation.
func (b *builder) duplicated(d int) bool {
	for _, o := range b.deviceByID[b.p.Devices[d].ID] {
		if o != d && b.copyOf[o] == b.copyOf[d] {
			return true
		}
	}
	return false
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// reach computes from which nodes a device can be used, as the scheduler's
// NodeMatches does for the slice or, with perDeviceNodeSelection, the device.
func (b *builder) reach(d *Device) error {
	spec, slice := d.Spec, d.Slice.Spec
	var nodeName *string
	var sel *corev1.NodeSelector
	var all bool
	if slice.PerDeviceNodeSelection != nil && *slice.PerDeviceNodeSelection {
		nodeName, sel, all = spec.NodeName, spec.NodeSelector, spec.AllNodes != nil && *spec.AllNodes
	} else {
		nodeName, sel, all = slice.NodeName, slice.NodeSelector, slice.AllNodes != nil && *slice.AllNodes
	}
	defer b.optionalNodeOperations(d)
	switch {
	case nodeName != nil && *nodeName != "":
		d.NodeLocal = true
		if i, ok := b.nodeByName[*nodeName]; ok {
			d.Reach = []int{i}
		}
	case all:
		d.All = true
	case sel != nil:
		d.Selector = sel
		ns, err := nodeaffinity.NewNodeSelector(sel)
		if err != nil {
			return fmt.Errorf("field nodeSelector: %w", err)
		}
		for i, n := range b.p.Nodes {
			if ns.Match(n.Obj) {
				d.Reach = append(d.Reach, i)
			}
		}
	}
	return nil
}

// optionalNodeOperations: a device of a slice with skipNodeOperations can
// only be allocated for a node that declares the DRAOptionalNodeOperations
// feature in status.declaredFeatures, as upstream's allocator requires.
func (b *builder) optionalNodeOperations(d *Device) {
	if len(d.Slice.Spec.SkipNodeOperations) == 0 {
		return
	}
	declares := func(n int) bool {
		return slices.Contains(b.p.Nodes[n].Obj.Status.DeclaredFeatures, draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate)
	}
	if d.All {
		// Every node becomes "every declaring node", named one by one.
		d.All = false
		d.Reach = nil
		for n := range b.p.Nodes {
			d.Reach = append(d.Reach, n)
		}
	}
	d.Sees = slices.Clone(d.Reach)
	if d.Sees == nil {
		d.Sees = []int{}
	}
	d.Reach = slices.DeleteFunc(d.Reach, func(n int) bool { return !declares(n) })
}

// applyExisting marks devices of allocated claims as in use and takes their
// counters, as the scheduler's allocated state does: a result without
// shareID holds its device, one with a shareID is a share of it whose
// consumedCapacity counts, and counters are consumed once per allocated
// device. Admin-access results neither occupy devices nor consume counters.
func (b *builder) applyExisting() {
	charged := map[input.DeviceID]bool{}
	for _, c := range b.objs.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		b.p.Allocated = append(b.p.Allocated, c)
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
			idxs, ok := b.deviceByID[id]
			if !ok {
				b.p.Warnings = append(b.p.Warnings, fmt.Sprintf("%s: allocated device %s/%s/%s is not in any usable pool; its counters are unknown",
					b.origin("ResourceClaim", c.Namespace, c.Name), r.Driver, r.Pool, r.Device))
				continue
			}
			// Every generation's copy of the device is allocated.
			for _, idx := range idxs {
				d := b.p.Devices[idx]
				if r.ShareID != nil {
					d.ExistingShared = true
					b.addExistingShare(idx, r.ConsumedCapacity)
				} else {
					if d.InUse && idx == idxs[0] {
						b.p.Warnings = append(b.p.Warnings, fmt.Sprintf("%s: device %s is allocated more than once", b.origin("ResourceClaim", c.Namespace, c.Name), d.ID))
					}
					d.InUse = true
				}
			}
			if charged[id] {
				continue
			}
			charged[id] = true
			// Each generation that has the device counts what it says
			// the device consumes.
			for _, idx := range idxs {
				for _, cons := range b.p.Devices[idx].Consumes {
					set := b.p.CounterSets[cons.Set]
					for j, a := range cons.Amounts {
						set.Free[j] = SubUnits(set.Free[j], a)
					}
					set.ExistingGroups = append(set.ExistingGroups, cons.Groups)
				}
			}
		}
	}
}

// markOverdrawnPools sets PoolOverdrawn on the devices of every pool copy
// in which existing allocations already consume more of some counter than
// it has. The allocator's checkAvailableCounters, run for each device that
// consumes counters, compares every counter of the pool, not only those
// the device consumes, and refuses the device when any is exceeded; so an
// overdrawn counter blocks all of the pool's counter consumers.
func (b *builder) markOverdrawnPools() {
	over := map[int]bool{}
	for _, set := range b.p.CounterSets {
		for _, f := range set.Free {
			if f < 0 {
				over[b.setCopy[set.Index]] = true
			}
		}
	}
	if len(over) == 0 {
		return
	}
	for _, d := range b.p.Devices {
		if over[b.copyOf[d.Index]] {
			d.PoolOverdrawn = true
		}
	}
}

// buildCompatibleOnlyWith evaluates the research extension: a device with
// expression E may only be allocated together with devices of its pool for
// which E holds, and the relation is made symmetric.
func (b *builder) buildCompatibleOnlyWith() error {
	if len(b.objs.CompatibleOnlyWith) == 0 {
		return nil
	}
	byPool := map[poolKey][]int{}
	for _, d := range b.p.Devices {
		k := poolKey{d.ID.Driver, d.ID.Pool}
		byPool[k] = append(byPool[k], d.Index)
	}
	pairs := map[[2]int]bool{}
	for _, d := range b.p.Devices {
		expr, ok := b.objs.CompatibleOnlyWith[d.ID]
		if !ok {
			continue
		}
		d.CompatibleOnlyWith = expr
		if err := b.cel.compile(expr); err != nil {
			return fmt.Errorf("device %s: field compatibleOnlyWith.expression: %w", d.ID, err)
		}
		for _, o := range byPool[poolKey{d.ID.Driver, d.ID.Pool}] {
			if o == d.Index {
				continue
			}
			other := b.p.Devices[o]
			ok, err := b.cel.eval(expr, other.ID.Driver, other.Spec)
			if err != nil {
				return fmt.Errorf("device %s: field compatibleOnlyWith.expression: %w", d.ID, err)
			}
			if !ok {
				pairs[[2]int{min(d.Index, o), max(d.Index, o)}] = true
			}
		}
	}
	for pr := range pairs {
		b.p.Devices[pr[0]].Incompatible = append(b.p.Devices[pr[0]].Incompatible, pr[1])
		b.p.Devices[pr[1]].Incompatible = append(b.p.Devices[pr[1]].Incompatible, pr[0])
	}
	for _, d := range b.p.Devices {
		sort.Ints(d.Incompatible)
		d.Incompatible = slices.Compact(d.Incompatible)
	}
	return nil
}

func (b *builder) buildClaims() error {
	b.classes = map[string]*resourceapi.DeviceClass{}
	for _, c := range b.objs.Classes {
		b.classes[c.Name] = c
	}
	fixed := b.objs.PinnedNodes()
	// Claims whose selectors are all cheap are built first, so that a
	// batch's expensive selectors, which may run the build out of its
	// deadline, cannot take the time of the ordinary claims after them.
	var later []*Claim
	for _, obj := range b.objs.Claims {
		if obj.Status.Allocation != nil {
			continue
		}
		c := &Claim{Index: len(b.p.Claims), Key: obj.Namespace + "/" + obj.Name, Obj: obj, Weight: 1, FixedNode: -1}
		if w, ok := obj.Annotations[WeightAnnotation]; ok {
			n, err := strconv.ParseInt(w, 10, 64)
			if err != nil || n < 0 || n > MaxWeight {
				return fmt.Errorf("%s: field metadata.annotations[%s]: %q is not an integer in [0, %d]", b.origin("ResourceClaim", obj.Namespace, obj.Name), WeightAnnotation, w, MaxWeight)
			}
			c.Weight = n
		}
		if node, ok := fixed[c.Key]; ok {
			if i, known := b.nodeByName[node]; known {
				c.FixedNode = i
			} else {
				c.Err = fmt.Errorf("reserved for a pod on node %s, which is not known", node)
			}
		}
		b.p.Claims = append(b.p.Claims, c)
		switch {
		case c.Err != nil:
		case b.cheapSelectors(obj):
			c.Err = b.buildRequests(c)
		default:
			later = append(later, c)
		}
	}
	for _, c := range later {
		c.Err = b.buildRequests(c)
	}
	return nil
}

// cheapSelectors tells whether every CEL selector the claim's requests
// use, their classes' included, is cheap (CheapSelectorCost). A selector
// that does not compile counts as cheap: it fails at once.
func (b *builder) cheapSelectors(obj *resourceapi.ResourceClaim) bool {
	cheap := func(class string, sels []resourceapi.DeviceSelector) bool {
		if c := b.classes[class]; c != nil {
			sels = append(slices.Clone(c.Spec.Selectors), sels...)
		}
		for _, s := range sels {
			if s.CEL == nil {
				continue
			}
			if b.cel.compile(s.CEL.Expression) == nil && b.cel.estimate[s.CEL.Expression] > CheapSelectorCost {
				return false
			}
		}
		return true
	}
	for _, r := range obj.Spec.Devices.Requests {
		if r.Exactly != nil && !cheap(r.Exactly.DeviceClassName, r.Exactly.Selectors) {
			return false
		}
		for _, s := range r.FirstAvailable {
			if !cheap(s.DeviceClassName, s.Selectors) {
				return false
			}
		}
	}
	return true
}

var errUnsupported = errors.New("not supported by drasat yet")

func (b *builder) buildRequests(c *Claim) error {
	spec := c.Obj.Spec.Devices
	for i, r := range spec.Requests {
		req := &Request{Name: r.Name}
		switch {
		case r.Exactly != nil:
			alt, err := b.alternative(c, r.Name, "", r.Exactly.DeviceClassName, r.Exactly.Selectors, r.Exactly.AllocationMode,
				r.Exactly.Count, r.Exactly.AdminAccess, r.Exactly.Tolerations, r.Exactly.Capacity, r.Exactly.DerivedAttributes)
			if err != nil {
				return fmt.Errorf("request %s: %w", r.Name, err)
			}
			req.Alternatives = []*Alternative{alt}
		case len(r.FirstAvailable) > 0:
			req.FirstAvail = true
			for _, s := range r.FirstAvailable {
				alt, err := b.alternative(c, r.Name, s.Name, s.DeviceClassName, s.Selectors, s.AllocationMode,
					s.Count, nil, s.Tolerations, s.Capacity, s.DerivedAttributes)
				if err != nil {
					return fmt.Errorf("request %s/%s: %w", r.Name, s.Name, err)
				}
				req.Alternatives = append(req.Alternatives, alt)
			}
		default:
			return fmt.Errorf("field spec.devices.requests[%d]: neither exactly nor firstAvailable is set", i)
		}
		c.Requests = append(c.Requests, req)
	}
	if err := limitResults(c); err != nil {
		return err
	}
	for i, con := range spec.Constraints {
		k := &Constraint{Requests: con.Requests}
		switch {
		case con.MatchAttribute != nil:
			k.Kind, k.Attribute = MatchAttribute, string(*con.MatchAttribute)
		case con.DistinctAttribute != nil:
			k.Kind, k.Attribute = DistinctAttribute, string(*con.DistinctAttribute)
		default:
			// A constraint type of a newer API: an error for the claim, as upstream.
			return fmt.Errorf("field spec.devices.constraints[%d]: neither matchAttribute nor distinctAttribute is set (unknown constraint type)", i)
		}
		key, shared := k.Attribute, true
		for _, req := range c.Requests {
			for _, alt := range req.Alternatives {
				if !k.Applies(req, alt) {
					continue
				}
				if _, derived := alt.Derived[k.Attribute]; derived {
					shared = false
				}
				key += fmt.Sprintf("|%p/%d", unsafe.SliceData(alt.Candidates), len(alt.Candidates))
			}
		}
		k.Values = b.attributeTable(k.Attribute)
		if b.lookedUp[key] && shared {
			c.Constraints = append(c.Constraints, k)
			continue
		}
		if shared {
			b.lookedUp[key] = true
		}
		for _, req := range c.Requests {
			for _, alt := range req.Alternatives {
				if !k.Applies(req, alt) {
					continue
				}
				expr, derived := alt.Derived[k.Attribute]
				for _, d := range alt.Candidates {
					if !derived {
						if k.Values[d] == nil { // else another claim's lookup put it there
							k.Values[d] = b.cel.attributeSet(b.p.Devices[d], k.Attribute, len(b.p.Devices))
						}
						continue
					}
					dev := b.p.Devices[d]
					// A derived attribute (alpha) shadows the device's
					// own for this request, as upstream's lookupAttribute.
					vals, err := b.cel.derived(expr, dev)
					if be := (*BudgetError)(nil); errors.As(err, &be) {
						return fmt.Errorf("derived attribute %s: %w", k.Attribute, err) // the claim, never a partial evaluation
					}
					if err != nil {
						if alt.derivedErrs == nil {
							alt.derivedErrs = map[int]error{}
						}
						alt.derivedErrs[d] = fmt.Errorf("derived attribute %s: %w", k.Attribute, err)
						continue
					}
					if k.AltValues == nil {
						k.AltValues = map[*Alternative]map[int][]string{}
					}
					if k.AltValues[alt] == nil {
						k.AltValues[alt] = map[int][]string{}
					}
					k.AltValues[alt][d] = vals
				}
			}
		}
		c.Constraints = append(c.Constraints, k)
	}
	return b.allSelectorError(c)
}

func (b *builder) alternative(c *Claim, reqName, subName, className string, sels []resourceapi.DeviceSelector,
	mode resourceapi.DeviceAllocationMode, count int64, admin *bool, tols []resourceapi.DeviceToleration,
	capReq *resourceapi.CapacityRequirements, derived []resourceapi.DeviceDerivedAttribute) (*Alternative, error) {
	alt := &Alternative{Name: reqName, SubName: subName, AdminAccess: admin != nil && *admin, CapacityRequests: capReq, Tolerations: tols}
	if subName != "" {
		alt.Name = reqName + "/" + subName
	}
	for i, da := range derived {
		if err := b.cel.compileDerived(da.Expression); err != nil {
			return nil, fmt.Errorf("field derivedAttributes[%d] (%s): %w", i, da.Name, err)
		}
		if alt.Derived == nil {
			alt.Derived = map[string]string{}
		}
		alt.Derived[string(da.Name)] = da.Expression
	}
	class := b.classes[className]
	if class == nil {
		return nil, fmt.Errorf("device class %q not found", className)
	}
	alt.Class = class
	switch mode {
	case resourceapi.DeviceAllocationModeExactCount, "":
		if count == 0 {
			count = 1
		}
		if count < 1 {
			return nil, fmt.Errorf("field count: %d is below 1", count)
		}
		// Above the claim's 32 results the alternative cannot be met;
		// limitResults decides what that means for the claim.
		alt.Count = int(min(count, resourceapi.AllocationResultsMaxSize+1))
	case resourceapi.DeviceAllocationModeAll:
		alt.All = true
		// A node that sees a pool incomplete or invalid makes the
		// allocator fail "All" with an error there, and an error on any
		// node aborts the pod's scheduling attempt: the claim fails.
		for _, is := range b.p.Issues {
			if is.TooLarge == nil || b.anyMatches(class, sels, is.TooLarge) {
				return nil, fmt.Errorf("allocationMode All needs every pool usable, but %s", is)
			}
		}
	default:
		return nil, fmt.Errorf("field allocationMode: unknown mode %q", mode)
	}
	everyMatch := b.p.Options.EveryMatch != nil && c.Obj != nil && b.p.Options.EveryMatch(c.Obj)
	key := fmt.Sprintf("%s|%s|%t|%t|%s|%s|%t", className, selectorsKey(sels), alt.All, alt.AdminAccess, tolerationsKey(tols), capacityKey(capReq), everyMatch)
	if m, ok := b.matchCache[key]; ok {
		if m.err != nil {
			return nil, m.err
		}
		alt.Candidates, alt.AllMatch, alt.onNode, alt.caps, alt.Shared, alt.celErrs = m.candidates, m.allMatch, m.onNode, m.caps, m.shared, m.celErrs
		if alt.caps != nil {
			alt.caps.uses++
		}
		return alt, nil
	}
	cands, allMatch, celErrs, err := b.match(class, sels, alt, tols, everyMatch)
	if err != nil {
		b.matchCache[key] = matchResult{err: err}
		return nil, err
	}
	alt.celErrs = celErrs
	alt.Candidates, alt.AllMatch = cands, allMatch
	alt.indexByNode(b.p)
	if alt.caps != nil {
		alt.caps.uses++
	}
	b.matchCache[key] = matchResult{cands, allMatch, alt.onNode, alt.caps, alt.Shared, celErrs, nil}
	return alt, nil
}

// limitResults applies the limit of 32 results per claim, summed over its
// requests, as upstream does. Each request needs at least the smallest
// count among its alternatives (an All-mode alternative at least one
// device); when these minimums exceed 32 the claim cannot be allocated.
// Otherwise an alternative that would take the claim past 32 together with
// the other requests' minimums can never be met: it is left without
// candidates, so the next firstAvailable subrequest is tried. Which
// combination of alternatives stays within 32 (and All-mode, whose count
// depends on the node) is left to the search, which counts the results.
func limitResults(c *Claim) error {
	minCount := func(a *Alternative) int {
		if a.All {
			return 1
		}
		return a.Count
	}
	mins := make([]int, len(c.Requests))
	sum := 0
	for i, r := range c.Requests {
		mins[i] = math.MaxInt
		for _, a := range r.Alternatives {
			mins[i] = min(mins[i], minCount(a))
		}
		if mins[i] > MaxResults-sum {
			return fmt.Errorf("request %s: adding %d devices exceeds the claim limit of %d results, with %d already accounted for", r.Name, mins[i], MaxResults, sum)
		}
		sum += mins[i]
	}
	for i, r := range c.Requests {
		for _, a := range r.Alternatives {
			if minCount(a) > MaxResults-(sum-mins[i]) {
				a.Candidates, a.AllMatch, a.OverLimit = nil, nil, true
				a.onNode = map[int][]int{}
			}
		}
	}
	return nil
}

// resultLimitError: on every node it tries, before it searches, the
// allocator adds up the fewest results each request could take there (a
// firstAvailable request its smallest subrequest), where an All request
// (or subrequest) takes every matching device the node sees; past 32 it
// fails with an error, which aborts the pod's scheduling attempt, whatever
// other nodes offer. limitResults did this with one device for All.
func (b *builder) resultLimitError(c *Claim) error {
	nodes := b.searchNodes
	if !c.anyAll() {
		// Without allocationMode All a request counts alike on every
		// node: the first node the search tries says it for all (and a
		// cluster's thousands of nodes are not walked for every claim).
		nodes = b.firstSearchNode
	}
	for _, n := range nodes(c) {
		sum := 0
		for _, r := range c.Requests {
			least := math.MaxInt
			for _, a := range r.Alternatives {
				k := a.Count
				if a.All {
					k = 0
					for _, d := range a.AllMatch {
						if n < 0 || b.p.Devices[d].SeenFrom(n) {
							k++
						}
					}
					if a.OverLimit {
						k = 1 // limitResults: even one is too many
					}
				}
				least = min(least, k)
			}
			if least > MaxResults-sum {
				where := ""
				if n >= 0 {
					where = " on node " + b.p.Nodes[n].Name
				}
				return fmt.Errorf("request %s: adding %d devices exceeds the claim limit of %d results, with %d already accounted for%s", r.Name, least, MaxResults, sum, where)
			}
			sum += least
		}
	}
	return nil
}

// allSelectorError: the allocator evaluates an allocationMode All
// request's selectors on every device of the node's slices before it
// searches, so a selector failing at run time there is an error on every
// node that sees the device, and an error on any node aborts the pod's
// scheduling attempt: the claim fails. Other requests evaluate their
// selectors, and derived attributes, as the search reaches a device;
// whether it gets there is decided by following the search
// (searchOrderError).
func (b *builder) allSelectorError(c *Claim) error {
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			if a.All {
				for _, d := range slices.Sorted(maps.Keys(a.celErrs)) {
					return a.celErrs[d]
				}
			}
		}
	}
	return nil
}

// MaxResults is the limit on a claim's results (all requests together).
const MaxResults = resourceapi.AllocationResultsMaxSize

// anyMatches tells whether some device of the slices matches the class's
// and the request's selectors (a selector error counts as a match: the
// device might be one the request needs).
func (b *builder) anyMatches(class *resourceapi.DeviceClass, sels []resourceapi.DeviceSelector, slices []*resourceapi.ResourceSlice) bool {
	all := append(append([]resourceapi.DeviceSelector(nil), class.Spec.Selectors...), sels...)
	for _, s := range slices {
		for i := range s.Spec.Devices {
			match := true
			for _, sel := range all {
				if sel.CEL == nil {
					return true
				}
				ok, err := b.cel.eval(sel.CEL.Expression, s.Spec.Driver, &s.Spec.Devices[i])
				if err != nil {
					return true
				}
				if !ok {
					match = false
					break
				}
			}
			if match {
				return true
			}
		}
	}
	return false
}

// matchResult caches which devices an alternative may use: many claims ask
// for the same class with the same selectors.
type matchResult struct {
	candidates, allMatch []int
	onNode               map[int][]int
	caps                 *altCapacity
	shared               bool
	celErrs              map[int]error
	err                  error
}

func capacityKey(c *resourceapi.CapacityRequirements) string {
	if c == nil {
		return ""
	}
	js, _ := json.Marshal(c)
	return string(js)
}

func selectorsKey(sels []resourceapi.DeviceSelector) string {
	js, _ := json.Marshal(sels)
	return string(js)
}

func tolerationsKey(tols []resourceapi.DeviceToleration) string {
	js, _ := json.Marshal(tols)
	return string(js)
}

// match evaluates the class's and the request's selectors on every device.
// Errors name the selector; they make the claims using it unallocatable.
func (b *builder) match(class *resourceapi.DeviceClass, sels []resourceapi.DeviceSelector, alt *Alternative,
	tols []resourceapi.DeviceToleration, everyMatch bool) (candidates, allMatch []int, celErrs map[int]error, err error) {
	var exprs []selector
	// A selector without cel is of a type drasat does not know (a newer
	// API): an error for the claim, as upstream, never "matches all".
	for i, s := range class.Spec.Selectors {
		if s.CEL == nil {
			return nil, nil, nil, fmt.Errorf("device class %s: field spec.selectors[%d]: no cel expression (unknown selector type)", class.Name, i)
		}
		exprs = append(exprs, selector{s.CEL.Expression, fmt.Sprintf("device class %s: field spec.selectors[%d].cel.expression", class.Name, i)})
	}
	for i, s := range sels {
		if s.CEL == nil {
			return nil, nil, nil, fmt.Errorf("field selectors[%d]: no cel expression (unknown selector type)", i)
		}
		exprs = append(exprs, selector{s.CEL.Expression, fmt.Sprintf("field selectors[%d].cel.expression", i)})
	}
	for _, e := range exprs {
		if err := b.cel.compile(e.expr); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", e.field, err)
		}
	}
	if err := b.cel.ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, nil, nil, err // Build reports it
	}
	walk, err := b.celWalk(class, sels, exprs)
	if err != nil {
		return nil, nil, nil, err
	}
	celErrs = walk.celErrs
	for _, d := range walk.matched {
		d := b.p.Devices[d]
		// Capacity, as the allocator checks it for every device: a device
		// lacking a requested capacity, or whose policy or value rules the
		// request out, does not match (not even for All).
		var consumed map[resourceapi.QualifiedName]resource.Quantity
		if d.MultiAlloc || alt.CapacityRequests != nil || !wholeCapacityFits(d.Spec.Capacity) {
			var fits bool
			var capErr error
			consumed, fits, capErr = ConsumedCapacity(alt.CapacityRequests, d.Spec.Capacity)
			if capErr != nil && (alt.All || !d.InUse || alt.AdminAccess) {
				return nil, nil, nil, fmt.Errorf("device %s: %w", d.ID, capErr)
			}
			if !fits {
				continue
			}
		}
		if alt.All {
			// "All" needs every matching device, so one that cannot be
			// taken makes its nodes unusable; the encoder sees it in AllMatch.
			allMatch = append(allMatch, d.Index)
		}
		if TaintPrevents(d.Spec, tols) {
			continue
		}
		if !everyMatch && (!FitsAlone(b.p, d) || d.InUse && !alt.AdminAccess || !b.capacityFits(d, consumed)) {
			continue
		}
		candidates = append(candidates, d.Index)
		if d.MultiAlloc {
			if alt.caps == nil {
				alt.caps = &altCapacity{consumed: map[int]map[resourceapi.QualifiedName]resource.Quantity{}, amounts: map[int][]int64{}, shares: map[int][]float64{}}
				b.altCaps = append(b.altCaps, alt.caps)
			}
			alt.caps.consumed[d.Index] = consumed
			alt.Shared = true
		}
	}
	return candidates, allMatch, celErrs, nil
}

// walkEveryAlternative makes celWalk walk every device for every
// alternative, as builds did before it kept its walks (for tests: the
// problems must be the same).
var walkEveryAlternative = false

// selector is a CEL selector and the field it is in, for errors.
type selector struct {
	expr, field string
}

// celMatch is the devices that a class and selectors match, by CEL alone,
// in one build: the reachable devices every selector accepts, and the
// devices some selector failed on (with the first error), in device order.
type celMatch struct {
	matched, failed []int
	celErrs         map[int]error
	err             error // a BudgetError: no device is matched then
}

// celWalk evaluates the selectors on every device, once per build for a
// class and selectors: alternatives that differ in the rest (capacity,
// tolerations, admin access, allocationMode, the look-ahead's shapes asking
// for every match) filter the same devices. A later walk asks again only
// the devices an evaluation failed on, as walking them all would (a
// failed evaluation is not kept, and is evaluated and charged again), so
// the CEL cost spent is what one walk per alternative spent.
func (b *builder) celWalk(class *resourceapi.DeviceClass, sels []resourceapi.DeviceSelector, exprs []selector) (*celMatch, error) {
	key := class.Name + "|" + selectorsKey(sels)
	if b.celWalks == nil {
		b.celWalks = map[string]*celMatch{}
	}
	if w := b.celWalks[key]; w != nil && !walkEveryAlternative {
		if w.err != nil {
			return nil, w.err
		}
		for _, d := range w.failed {
			if _, _, err := b.selectorsOn(b.p.Devices[d], exprs); err != nil {
				return nil, err
			}
		}
		return w, nil
	}
	w := &celMatch{}
	for _, d := range b.p.Devices {
		unreachable := !d.All && len(d.Reach) == 0
		if unreachable && len(b.selectorNodes(d)) == 0 {
			continue // upstream never looks at it
		}
		match, celErr, err := b.selectorsOn(d, exprs)
		if err != nil {
			// Not evaluated in budget: the claim fails, never
			// allocated on the devices evaluated so far.
			w.err = err
			b.celWalks[key] = w
			return nil, err
		}
		if celErr != nil {
			// Upstream fails the claim on a node whose devices
			// include this one; other nodes are not affected.
			if w.celErrs == nil {
				w.celErrs = map[int]error{}
			}
			w.celErrs[d.Index] = celErr
			w.failed = append(w.failed, d.Index)
		}
		if match && !unreachable {
			w.matched = append(w.matched, d.Index)
		}
	}
	b.celWalks[key] = w
	return w, nil
}

// selectorsOn evaluates the selectors on d in order, up to the first that
// rejects it or fails on it (celErr, naming the field); err is a
// BudgetError, the walk's end.
func (b *builder) selectorsOn(d *Device, exprs []selector) (match bool, celErr, err error) {
	for _, e := range exprs {
		ok, err := b.cel.matches(e.expr, d, len(b.p.Devices))
		if be := (*BudgetError)(nil); errors.As(err, &be) {
			return false, nil, fmt.Errorf("%s: %w", e.field, err)
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", e.field, err), nil
		}
		if !ok {
			return false, nil, nil
		}
	}
	return true, nil, nil
}

// FitsAlone is false for a device whose consumption exceeds what is free: it can never be
// allocated in this run. A shared device with existing shares consumes no
// more counters.
func FitsAlone(p *Problem, d *Device) bool {
	if d.MultiAlloc && d.ExistingShared {
		return true
	}
	if len(d.Consumes) > 0 && d.PoolOverdrawn {
		return false
	}
	for _, cons := range d.Consumes {
		set := p.CounterSets[cons.Set]
		for j, a := range cons.Amounts {
			if a > set.Free[j] {
				return false
			}
		}
	}
	return true
}

// TaintPrevents tells whether a NoSchedule or NoExecute taint of dev is not
// tolerated.
func TaintPrevents(dev *resourceapi.Device, tols []resourceapi.DeviceToleration) bool {
	for _, t := range dev.Taints {
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		tolerated := false
		for _, tol := range tols {
			if resourceclaim.ToleratesTaint(tol, t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return true
		}
	}
	return false
}
