package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Problem is the allocation problem derived from Objects: usable devices and
// counter sets, nodes, and the pending claims with their candidate devices.
// Everything is indexed by position so encoders can use dense slices.
type Problem struct {
	// nodesByClass shares CandidateNodes among the claims of a class
	// (set by Build; a copy of the Problem shares it, as it shares the
	// devices the nodes come from).
	nodesByClass *classNodes
	// locality is which node each device's takes change (fingerprint.go),
	// computed once and shared by the copies, like nodesByClass.
	locality *locality

	// searchLate marks devices of pools with binding conditions, which the
	// allocator's search tries last (for PlaceLast).
	searchLate []bool

	Devices     []*Device
	CounterSets []*CounterSet
	Nodes       []Node
	// AnyNode is true when no node is known at all; then only devices
	// available on all nodes can be allocated and results carry no node.
	Claims []*Claim // pending claims, input order
	// Allocated are the claims that already have an allocation; their devices
	// and counters are subtracted from what is free.
	Allocated []*resourceapi.ResourceClaim
	// Pods are the pending pods using pending claims, PodGroups the sets
	// of claims their pods tie to one node (pods.go). Resources names what
	// pods request of nodes; NodeFree is, per node and resource, what is
	// left once bound and nominated pods are counted.
	Pods      []*Pod
	PodGroups []*PodGroup
	Resources []corev1.ResourceName
	NodeFree  [][]int64
	// Issues lists pools left out and why.
	Issues []PoolIssue
	// Warnings are non-fatal remarks (existing allocations naming unknown
	// devices, ...).
	Warnings []string
	Options  Options
	// CELCost is the actual CEL cost of every selector evaluation of the
	// build together (at most Options.CELCost, but for cheap selectors).
	CELCost uint64
}

// Options selects semantic variants.
type Options struct {
	// Compat is "kep5963" (default) or "wildcard".
	Compat string
	// CELCost bounds the CEL cost of all selector evaluations of one build
	// together; 0 means DefaultCELCost. Past it, only cheap selectors
	// (CheapSelectorCost) are still evaluated; the claims using the others
	// are not allocated, with a reason naming the selector and the budget.
	CELCost uint64
	// Memo, when set, carries the selectors' answers per device from one
	// build to the next (Memo): the controller's passes. The
	// problem built is the same as without it.
	Memo *Memo `json:"-"`
	// EveryMatch, when set, picks claims whose candidates are every
	// device that matches and tolerates the taints, whatever runs: not
	// left out for being in use or short of counters or capacity. For
	// claims that are only read, never allocated (the frag look-ahead's
	// workload shapes, which are split off the problem): which devices
	// such a claim could ever use must not depend on the cluster's state.
	EveryMatch func(*resourceapi.ResourceClaim) bool `json:"-"`
}

const (
	CompatKEP5963  = "kep5963"
	CompatWildcard = "wildcard"
)

// PoolIssue explains why a pool is not used.
type PoolIssue struct {
	Driver, Pool string
	Reason       string
	// TooLarge holds the slices of a pool left out only because a counter
	// does not fit drasat's integers; the scheduler would use it, so
	// allocationMode All is blocked only where one of its devices matches.
	TooLarge []*resourceapi.ResourceSlice `json:"-"`
}

func (p PoolIssue) String() string { return "pool " + p.Driver + "/" + p.Pool + ": " + p.Reason }

// Node is one node that claims can be allocated for.
type Node struct {
	Name string
	Obj  *corev1.Node // nil when only named by a slice
}

// Device is one allocatable device of a usable pool.
type Device struct {
	Index int
	ID    input.DeviceID
	Slice *resourceapi.ResourceSlice
	Spec  *resourceapi.Device

	Consumes []Consumption
	// Reach lists the node indices from which the device is reachable; All
	// means every node (allNodes).
	Reach []int
	All   bool
	// Sees, when not nil, lists the nodes whose allocationMode All counts
	// the device although it cannot be allocated there (skipNodeOperations
	// on a node without DRAOptionalNodeOperations): All fails on them.
	Sees []int
	// NodeLocal: the device is published for one node by name; results
	// then pin the claim to the node (upstream createNodeSelector).
	NodeLocal   bool
	BindsToNode bool
	// Selector is the device's or slice's node selector, when that is how
	// its nodes are given (multi-host devices).
	Selector *corev1.NodeSelector

	// InUse: an existing claim holds the device (a non-admin result
	// without shareID); only admin access may take it then.
	InUse bool
	// MultiAlloc (allowMultipleAllocations): several claims, and several
	// requests of one claim, may share the device within its Capacity.
	// Its counters are consumed once, by the first share.
	MultiAlloc bool
	// Capacity lists a MultiAlloc device's capacities, sorted by name;
	// what each share consumes is Alternative.CapacityAmounts.
	Capacity []CapacityDim
	// ExistingShared: an existing non-admin result with a shareID names
	// the device; its counters are consumed already and new shares do not
	// consume them again.
	ExistingShared bool
	// PoolOverdrawn: existing allocations already exceed some counter of
	// the device's pool (its generation), in any counter set. The
	// allocator then refuses every device of the pool that consumes
	// counters, whichever counters it consumes (FitsAlone).
	PoolOverdrawn bool

	// CompatibleOnlyWith is the research extension's CEL expression, "" if none.
	CompatibleOnlyWith string
	// Incompatible lists devices of the same pool that compatibleOnlyWith
	// forbids together with this one (either direction), sorted; and the
	// other copies of its name and the pairs that separateGenerations
	// keeps apart.
	Incompatible []int
	// OrderExclusive is the part of Incompatible that only keeps two
	// claims from depending on the order the scheduler places them in
	// (separateGenerations); within one claim, as the scheduler's search
	// for it sees them, the devices go together.
	OrderExclusive []int
}

// Consumption is what a device takes from one counter set.
type Consumption struct {
	Set     int
	Amounts []int64 // per counter of the set, in the set's scaled units
	Groups  []string
}

// CounterSet is a pool's shared counter set with exact, scaled capacities.
type CounterSet struct {
	Index              int
	Driver, Pool, Name string
	Counters           []string // sorted counter names
	Capacity           []int64  // scaled
	Free               []int64  // capacity minus what existing allocations use
	Unit               []string // the quantity one scaled unit stands for, per counter
	// ExistingGroups are the compatibility group lists of devices already
	// allocated from this set (nil entry = no groups).
	ExistingGroups [][]string
	Devices        []int // devices consuming from this set
}

// Untouched tells whether no existing allocation uses the set: every
// counter free and no compatibility groups held. Binpack counts the
// untouched sets an allocation starts using.
func (cs *CounterSet) Untouched() bool {
	if len(cs.ExistingGroups) > 0 {
		return false
	}
	for i := range cs.Free {
		if cs.Free[i] != cs.Capacity[i] {
			return false
		}
	}
	return true
}

// ModeOpen tells, under KEP-5963 semantics, whether a new device may use
// mode x of the set: every existing allocation's modes (Modes) must
// include it. With nothing allocated every mode is open.
func (cs *CounterSet) ModeOpen(x string) bool {
	for _, g := range cs.ExistingGroups {
		if !slices.Contains(Modes(g), x) {
			return false
		}
	}
	return true
}

// CheckCompat tells whether compat names a compatibility-group semantics;
// empty means the default.
func CheckCompat(compat string) error {
	switch compat {
	case "", CompatKEP5963, CompatWildcard:
		return nil
	}
	return fmt.Errorf("compat mode %q: want %s or %s", compat, CompatKEP5963, CompatWildcard)
}

// Reachable tells whether some node, or every node, reaches the device.
func (d *Device) Reachable() bool { return d.All || len(d.Reach) > 0 }

// Reaches tells whether node n reaches the device.
func (d *Device) Reaches(n int) bool { return d.All || slices.Contains(d.Reach, n) }

// CommonNode is the one node that alone reaches every device of devs, or
// -1 (devices on every node, on several nodes, or on different ones).
func (p *Problem) CommonNode(devs []int) int {
	node := -1
	for _, d := range devs {
		dev := p.Devices[d]
		if dev.All || len(dev.Reach) != 1 || node >= 0 && dev.Reach[0] != node {
			return -1
		}
		node = dev.Reach[0]
	}
	return node
}

// Claim is a pending claim.
type Claim struct {
	Index  int
	Key    string // namespace/name
	Obj    *resourceapi.ResourceClaim
	Weight int64

	Requests    []*Request
	Constraints []*Constraint
	// FixedNode >= 0 when a pod bound to a node has reserved the claim.
	FixedNode int
	// Err makes the claim unallocatable (CEL runtime error, unsupported field).
	Err error
	// ExcludedNodes are nodes the claim cannot use: a selector fails at run
	// time on a device they reach (nil: none).
	ExcludedNodes map[int]bool
	// Pods are the pending pods using the claim (Problem.Pods), Group the
	// claims their pods tie to one node with it (nil: no pod). PodRefused
	// maps the nodes some pod of the group cannot run on to why (they are
	// also in ExcludedNodes).
	Pods       []int
	Group      *PodGroup
	PodRefused map[int]string

	classKey string
	nodes    []int
	// unheld is what the claim could use before the allocator's search
	// for it decided (holdTo, or a search from the existing allocations
	// that met an error): PlaceLast searches again from there.
	unheld *unheld
}

// CandidateNodes lists, in order, the nodes from which some candidate of
// the claim is reachable, or [-1] when no candidate is tied to a node.
// Computed once: every placement of the claim starts from it.
func (c *Claim) CandidateNodes(p *Problem) []int {
	if c.nodes != nil {
		return c.nodes
	}
	// Claims of one class (same requests, so the same candidates) reach
	// the same nodes, unless pods tie them to theirs: computed once per
	// class, not once per claim over every node.
	if c.Group != nil || len(c.ExcludedNodes) > 0 {
		return c.candidateNodes(p)
	}
	cn := p.nodesByClass
	if cn == nil {
		return c.candidateNodes(p)
	}
	key := c.ClassKey()
	cn.mu.Lock()
	nodes, ok := cn.m[key]
	cn.mu.Unlock()
	if !ok {
		nodes = c.candidateNodes(p)
		cn.mu.Lock()
		cn.m[key] = nodes
		cn.mu.Unlock()
	}
	c.nodes = nodes
	return nodes
}

// classNodes is the candidate nodes by class key.
type classNodes struct {
	mu sync.Mutex
	m  map[string][]int
}

func (c *Claim) candidateNodes(p *Problem) []int {
	set := map[int]bool{}
	needNode := false
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			for n := range a.onNode {
				if n >= 0 {
					set[n] = true
				}
			}
			if len(a.onNode[-1]) < len(a.Candidates) {
				needNode = true
			}
			// allocationMode All takes what the node sees: a matching
			// device on some nodes only (usable or not) makes the node
			// matter even when every candidate is on all nodes.
			for _, d := range a.AllMatch {
				if !p.Devices[d].All && len(p.Nodes) > 0 {
					needNode = true
				}
			}
		}
	}
	if !needNode && len(c.ExcludedNodes) == 0 && !p.Pinning(c) {
		c.nodes = []int{-1}
		return c.nodes
	}
	if !needNode && len(set) == 0 {
		// Only devices on all nodes: its pods still choose one.
		for n := range p.Nodes {
			set[n] = true
		}
	}
	c.nodes = make([]int, 0, len(set))
	for n := range set {
		if !c.ExcludedNodes[n] {
			c.nodes = append(c.nodes, n)
		}
	}
	sort.Ints(c.nodes)
	return c.nodes
}

// Request is one entry of spec.devices.requests: either one exact request
// (one alternative) or a firstAvailable list.
type Request struct {
	Name         string
	Alternatives []*Alternative
	FirstAvail   bool
}

// Alternative is an exact request or one subrequest of firstAvailable.
type Alternative struct {
	Name        string // result name: "req" or "req/sub"
	SubName     string
	Class       *resourceapi.DeviceClass
	All         bool // allocationMode All
	Count       int  // ExactCount
	AdminAccess bool
	// CapacityRequests is the request's capacity.requests (nil if none).
	CapacityRequests *resourceapi.CapacityRequirements
	// Shared: some candidate allows multiple allocations.
	Shared      bool
	Tolerations []resourceapi.DeviceToleration // copied into each result
	Candidates  []int                          // devices that match selectors and tolerate taints
	// AllMatch (allocationMode All only) lists every device matching the
	// selectors, usable or not: on a node where one of them cannot be
	// taken, the request cannot be satisfied.
	AllMatch []int
	// OverLimit: the alternative's count, with the other requests'
	// minimums, exceeds the claim's 32 results; it has no candidates.
	OverLimit bool

	// Derived maps a derivedAttributes name to its CEL expression (alpha).
	Derived map[string]string

	onNode      map[int][]int
	celErrs     map[int]error // device index to a selector's run-time error
	derivedErrs map[int]error // device index to a derived attribute's error
	caps        *altCapacity
}

// altCapacity is what an alternative consumes of the capacities of its
// MultiAlloc candidates; alternatives with the same match share it.
type altCapacity struct {
	consumed map[int]map[resourceapi.QualifiedName]resource.Quantity
	amounts  map[int][]int64   // scaled, in the order of Device.Capacity
	shares   map[int][]float64 // consumed / value, in the order of Device.Capacity
	uses     int               // alternatives sharing it: shares it may take of a device
}

// CapacityShares is what the alternative consumes of MultiAlloc device d,
// per entry of Device.Capacity as a share of its value; nil for other
// devices.
func (a *Alternative) CapacityShares(d int) []float64 {
	if a == nil || a.caps == nil {
		return nil
	}
	return a.caps.shares[d]
}

// ConsumedCapacity is what the alternative consumes of MultiAlloc device d,
// as written to the result's consumedCapacity; nil for other devices.
func (a *Alternative) ConsumedCapacity(d int) map[resourceapi.QualifiedName]resource.Quantity {
	if a == nil || a.caps == nil {
		return nil
	}
	return a.caps.consumed[d]
}

// CapacityAmounts is what the alternative consumes of MultiAlloc device d,
// per entry of Device.Capacity in its scaled units; nil for other devices
// (and for a nil alternative).
func (a *Alternative) CapacityAmounts(d int) []int64 {
	if a == nil || a.caps == nil {
		return nil
	}
	return a.caps.amounts[d]
}

// SeenFrom tells whether allocationMode All on node n must take d.
func (d *Device) SeenFrom(n int) bool {
	if d.Sees != nil {
		return slices.Contains(d.Sees, n)
	}
	return d.All || slices.Contains(d.Reach, n)
}

// CandidatesOn lists the candidates usable from node n, in candidate order;
// n = -1 means no node, where only devices available on all nodes serve.
func (a *Alternative) CandidatesOn(n int) []int { return a.onNode[n] }

// indexByNode fills CandidatesOn: placing a claim on one node then looks at
// that node's devices only, not at the whole cluster's.
func (a *Alternative) indexByNode(p *Problem) {
	a.onNode = map[int][]int{}
	for _, d := range a.Candidates {
		dev := p.Devices[d]
		if dev.All {
			a.onNode[-1] = append(a.onNode[-1], d)
			for n := range p.Nodes {
				a.onNode[n] = append(a.onNode[n], d)
			}
			continue
		}
		for _, n := range dev.Reach {
			a.onNode[n] = append(a.onNode[n], d)
		}
	}
}

// ConstraintKind is matchAttribute or distinctAttribute.
type ConstraintKind int

const (
	MatchAttribute ConstraintKind = iota
	DistinctAttribute
)

// Constraint is a claim's device constraint with attribute values resolved.
type Constraint struct {
	Kind      ConstraintKind
	Attribute string
	Requests  []string // empty: all requests
	// Values per device index: the attribute's values as a set of
	// canonical strings, sorted (one for a scalar, several for a list-type
	// attribute; the type is part of each string, so values of different
	// types never meet). Nil when the device lacks the attribute or its list
	// is empty: it cannot take part, as upstream. Every candidate of the
	// alternatives the constraint applies to is looked up; the table is
	// shared by all constraints on the attribute in the problem.
	Values AttributeValues
	// AltValues replaces Values for alternatives whose request defines
	// the attribute in derivedAttributes.
	AltValues map[*Alternative]map[int][]string
}

// ValuesOf is the value set of device d when it serves alternative a.
func (c *Constraint) ValuesOf(a *Alternative, d int) []string {
	if _, derived := a.Derived[c.Attribute]; derived {
		return c.AltValues[a][d]
	}
	return c.Values.At(d)
}

// AttributeValues is one attribute's value sets by device index. A value
// set is the device's, whoever asks, so one table serves every
// constraint on the attribute: per claim, a map of every candidate's
// values was most of a 1,000-node problem's memory. An entry is nil until
// looked up.
type AttributeValues []*[]string

// At is device d's value set: nil when the device lacks the attribute or
// it was not looked up.
func (v AttributeValues) At(d int) []string {
	if d < len(v) && v[d] != nil {
		return *v[d]
	}
	return nil
}

// lookUp is dev's value set of attribute name, looked up into v first if
// it is not there yet.
func (v AttributeValues) lookUp(dev *Device, name string) []string {
	if v[dev.Index] == nil {
		vals := attributeValues(dev.ID.Driver, dev.Spec, name)
		v[dev.Index] = &vals
	}
	return *v[dev.Index]
}

// Allows tells whether a device with values v may join devices already
// chosen under the constraint, as upstream's list-type-attribute semantics
// have it: matchAttribute needs one value that every device has (the
// intersection of all sets is non-empty; for scalars, equal values);
// distinctAttribute needs v disjoint from every chosen device's set.
func (c *Constraint) Allows(chosen [][]string, v []string) bool {
	if len(v) == 0 {
		return false
	}
	switch c.Kind {
	case MatchAttribute:
		common := v
		for _, w := range chosen {
			common = intersectSorted(common, w)
			if len(common) == 0 {
				return false
			}
		}
	case DistinctAttribute:
		for _, w := range chosen {
			if len(intersectSorted(v, w)) > 0 {
				return false
			}
		}
	}
	return true
}

// intersectSorted intersects two sorted sets.
func intersectSorted(a, b []string) []string {
	var out []string
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// Applies tells whether the constraint covers alternative alt of request req.
func (c *Constraint) Applies(req *Request, alt *Alternative) bool {
	if len(c.Requests) == 0 {
		return true // no list, or an empty one: all requests, as upstream
	}
	for _, r := range c.Requests {
		if r == req.Name || r == alt.Name {
			return true
		}
	}
	return false
}

// ClassKey is identical for interchangeable claims: same requests,
// constraints and config, same weight and same fixed node. Grouping claims
// by it removes claim symmetry (docs/encoding.md, facts 2).
func (c *Claim) ClassKey() string {
	if c.classKey == "" {
		// Claims of pods are tied to their pods' nodes and to the other
		// claims of their group. The claim of a group of one is
		// interchangeable with another such claim whose pods request the
		// same and may use the same nodes (pods meet only through the
		// nodes' resources: what drasat does not model between pods, such
		// as host ports, leaves the pod to the scheduler); a group of
		// several claims is a class of its own.
		var group string
		var requests []int64
		if g := c.Group; g != nil && len(g.Claims) > 1 {
			group = fmt.Sprint(g.Index)
		} else if g != nil {
			requests = g.Requests
		}
		js, _ := json.Marshal(struct {
			Spec     any
			Weight   int64
			Node     int
			Err      bool
			Group    string       `json:",omitempty"`
			Requests []int64      `json:",omitempty"`
			Excluded map[int]bool `json:",omitempty"`
		}{c.Obj.Spec.Devices, c.Weight, c.FixedNode, c.Err != nil, group, requests, c.ExcludedNodes})
		c.classKey = string(js)
	}
	return c.classKey
}
