// Package encode turns one component of an allocation problem into boolean
// variables, clauses and cardinality networks over a gini logic circuit.
//
// The model (docs/encoding.md):
//   - a unit is one pending claim, or a class of interchangeable "simple"
//     claims (one request for one device, no constraints) that share one set
//     of device variables and a count, which removes claim symmetry;
//   - x(unit, alternative, device) says the device serves that alternative;
//   - u(device) says the device is newly allocated; counters, compatibility
//     groups and compatibleOnlyWith are constraints over u;
//   - a shared device (allowMultipleAllocations) may have any number of x
//     true; its capacities are weighted sums over them;
//   - node variables pick the one node a claim's devices must be reachable
//     from, when that is not already implied by a single device.
package encode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"

	"github.com/drasat/drasat/model"
)

// Model is the encoded component.
type Model struct {
	P       *model.Problem
	C       *logic.C
	Clauses [][]z.Lit
	Units   []*Unit
	// Used maps devices with at least one x variable to u(device).
	Used map[int]z.Lit
	// Touched has one literal per counter set that starts untouched and may
	// be used: true when any of its devices is newly allocated.
	Touched []z.Lit
	// ImpliedCounters counts counters dropped because they cannot bind.
	ImpliedCounters int
	// Groups are the named constraint groups (Options.Groups), each guarded
	// by an assumption literal; Fixed has one literal per Options.Fixed
	// allocation, true when it stays in place.
	Groups []Group
	Fixed  []z.Lit

	impliedCache map[string][]bool
	groupsOn     bool
	guard        z.Lit // current group's literal while its clauses are added
	allowed      func(dev int) bool
	allowedList  []int // Options.AllowedDevices
}

// within returns the devices of cands (ascending, a claim's candidates)
// the model may use, in their order; when the allowed devices are not
// listed, or are more, cands itself: callers still check candidate.
func (m *Model) within(cands []int) []int {
	if m.allowedList == nil || len(cands) <= len(m.allowedList) {
		return cands
	}
	var out []int
	for _, d := range m.allowedList {
		if _, ok := slices.BinarySearch(cands, d); ok {
			out = append(out, d)
		}
	}
	return out
}

// candidate tells whether device d may get a variable: it is reachable from
// some node and allowed by Options.Allowed.
func (m *Model) candidate(d int) bool {
	return m.P.Devices[d].Reachable() && (m.allowed == nil || m.allowed(d))
}

// Unit is one claim, or a class of identical simple claims.
type Unit struct {
	Claims []*model.Claim // input order
	Simple bool
	// Admit is the admission literal of a non-simple claim.
	Admit z.Lit
	// Sel[r][a] selects alternative a of request r (non-simple).
	Sel [][]z.Lit
	// NodeIdx/NodeLit: candidate nodes, when a node must be chosen.
	NodeIdx []int
	NodeLit []z.Lit
	X       []X
	// Count counts the X of a simple unit.
	Count *logic.CardSort
}

// X is one device variable.
type X struct {
	Req, Alt, Dev int
	Lit           z.Lit
}

// AtLeast is a literal true iff at least j claims of the unit are admitted.
func (u *Unit) AtLeast(c *logic.C, j int) z.Lit {
	if j <= 0 {
		return c.T
	}
	if u.Simple {
		if j > len(u.Claims) {
			return c.F
		}
		return u.Count.Geq(j)
	}
	if j > 1 {
		return c.F
	}
	return u.Admit
}

func (m *Model) clause(ms ...z.Lit) {
	if m.guard != z.LitNull {
		m.Clauses = append(m.Clauses, append(append(make([]z.Lit, 0, len(ms)+1), ms...), m.guard.Not()))
		return
	}
	m.Clauses = append(m.Clauses, append([]z.Lit(nil), ms...))
}

// Options for encoding.
type Options struct {
	// Symmetry adds "claim i+1 only if claim i" between identical non-simple
	// claims; sound for maximising, not for ordered admission checks.
	Symmetry bool
	// Groups guards every constraint group (see Group) with its own
	// literal: the group holds only when the literal is assumed true, so an
	// unsatisfiable core over those assumptions names the groups at fault.
	Groups bool
	// PerClaim makes every claim its own unit with its own admission
	// literal, instead of grouping interchangeable simple claims.
	PerClaim bool
	// Fixed are allocations held in place (existing ones, or a run's
	// result). Each gets a literal in Model.Fixed that, when true, marks its
	// devices used: they then take part in exclusivity, counters,
	// compatibility groups and compatibleOnlyWith like any allocation.
	Fixed []Fixed
	// Allowed, when set, limits the devices claims may be given: the
	// others get no variable. Neighbourhood search uses it to repack a few
	// bins while the rest of the cluster stays as it is. Alternatives in
	// allocation mode All must not be limited (they need every matching
	// device of their node).
	Allowed func(dev int) bool
	// AllowedDevices, when set, is Allowed for exactly these devices
	// (ascending). A claim's candidates are then looked up from this list
	// when it is the shorter, instead of all being scanned: repacking a
	// GPU costs what the GPU holds, not what the cluster holds.
	AllowedDevices []int
	// DeviceSymmetry orders interchangeable devices (see
	// breakDeviceSymmetry). It is sound for finding allocations, but a
	// caller that assumes a given allocation (a hint) may find it
	// excluded, so it is off unless asked for.
	DeviceSymmetry bool
	// PodsPlaced are the pod groups with claims placed outside the model
	// (held in place), by node: their pods take the node's resources, and
	// their claims in the model go to that node and are admitted.
	PodsPlaced map[*model.PodGroup]int
}

// Fixed is an allocation held in place: the devices it occupies.
type Fixed struct {
	Name    string
	Devices []int
	// Amounts, when set, is per entry of Devices what it consumes of a
	// shared device's capacities (model.Alternative.CapacityAmounts; nil:
	// nothing). A shared device may appear once per request.
	Amounts [][]int64
}

// GroupKind names a kind of constraint group.
type GroupKind string

// The constraint groups guarded under Options.Groups.
const (
	GroupDevice             GroupKind = "device"             // Device serves at most one claim
	GroupCapacity           GroupKind = "capacity"           // capacity Counter of shared device Device
	GroupCounter            GroupKind = "counter"            // counter Counter of counter set Set
	GroupCompat             GroupKind = "compat"             // compatibility groups of counter set Set
	GroupCompatibleOnlyWith GroupKind = "compatibleOnlyWith" // Device and Other are not allocated together
	GroupConstraint         GroupKind = "constraint"         // constraint Constraint of claim Claim
	GroupNode               GroupKind = "node"               // claim Claim's devices are reachable from its node
	GroupFixed              GroupKind = "fixed"              // allocation Fixed stays in place (Lit is Model.Fixed[Fixed])
)

// Group is one named constraint group. Fields that do not apply are -1.
type Group struct {
	Kind              GroupKind
	Lit               z.Lit
	Set, Counter      int
	Device, Other     int
	Claim, Constraint int
	Fixed             int

	listed bool
}

func newGroup(kind GroupKind) Group {
	return Group{Kind: kind, Set: -1, Counter: -1, Device: -1, Other: -1, Claim: -1, Constraint: -1, Fixed: -1}
}

// guarded adds the clauses f adds as group g, when groups are on. The
// group's literal is made on first use, so several calls can add to one
// group; a group that adds no clause is not listed.
func (m *Model) guarded(g *Group, f func()) {
	if !m.groupsOn {
		f()
		return
	}
	prev := m.guard
	if g.Lit == z.LitNull {
		g.Lit = m.C.Lit()
	}
	m.guard = g.Lit
	n := len(m.Clauses)
	f()
	m.guard = prev
	if len(m.Clauses) > n && !g.listed {
		g.listed = true
		m.Groups = append(m.Groups, *g)
	}
}

// Encode builds the model for the given claims of p. It stops with ctx's
// error when ctx ends first (a large component's model can take seconds
// to build, and the caller's budget comes first).
func Encode(ctx context.Context, p *model.Problem, claims []*model.Claim, opts Options) (*Model, error) {
	m := &Model{P: p, C: logic.NewC(), Used: map[int]z.Lit{}, impliedCache: map[string][]bool{}, groupsOn: opts.Groups, allowed: opts.Allowed}
	if opts.AllowedDevices != nil {
		if opts.Allowed != nil {
			return nil, errors.New("encode: Allowed and AllowedDevices are both set")
		}
		set := make(map[int]bool, len(opts.AllowedDevices))
		for _, d := range opts.AllowedDevices {
			set[d] = true
		}
		m.allowedList = opts.AllowedDevices
		m.allowed = func(d int) bool { return set[d] }
	}
	if err := m.buildUnits(ctx, claims, opts); err != nil {
		return nil, err
	}
	m.pods(opts.PodsPlaced)
	uses := map[int][]z.Lit{}
	shares := map[int][]share{}
	var admin []consumer
	for _, u := range m.Units {
		for _, x := range u.X {
			if m.P.Devices[x.Dev].MultiAlloc {
				shares[x.Dev] = append(shares[x.Dev], share{x.Lit, u.altOf(x).CapacityAmounts(x.Dev)})
				continue
			}
			if u.altOf(x).AdminAccess {
				admin = append(admin, consumer{x.Dev, x.Lit})
			} else {
				uses[x.Dev] = append(uses[x.Dev], x.Lit)
			}
		}
	}
	for i, f := range opts.Fixed {
		l := m.C.Lit()
		m.Fixed = append(m.Fixed, l)
		if opts.Groups {
			g := newGroup(GroupFixed)
			g.Lit, g.Fixed = l, i
			m.Groups = append(m.Groups, g)
		}
		for k, d := range f.Devices {
			if m.P.Devices[d].MultiAlloc {
				var amounts []int64
				if k < len(f.Amounts) {
					amounts = f.Amounts[k]
				}
				shares[d] = append(shares[d], share{l, amounts})
				continue
			}
			uses[d] = append(uses[d], l)
		}
	}
	devs := make([]int, 0, len(uses))
	for d := range uses {
		devs = append(devs, d)
	}
	sort.Ints(devs)
	sharedDevs := make([]int, 0, len(shares))
	for d := range shares {
		sharedDevs = append(sharedDevs, d)
	}
	sort.Ints(sharedDevs)
	// A device serves at most one claim; u(d) is the disjunction.
	for i, d := range devs {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ls := uses[d]
		g := newGroup(GroupDevice)
		g.Device = d
		m.guarded(&g, func() { m.atMostOne(ls) })
		if len(ls) == 1 {
			m.Used[d] = ls[0]
			continue
		}
		u := m.C.Lit()
		or := []z.Lit{u.Not()}
		for _, l := range ls {
			m.clause(l.Not(), u)
			or = append(or, l)
		}
		m.clause(or...)
		m.Used[d] = u
	}
	for _, d := range sharedDevs {
		if err := m.shared(d, shares[d]); err != nil {
			return nil, err
		}
	}
	// Counters and compatibility see every consumer: used devices, and
	// admin-access picks, which upstream also checks against free counters.
	// A shared device consumes once, through its first share, and not at
	// all when existing shares consumed already.
	cons := make([]consumer, 0, len(devs)+len(admin)+len(sharedDevs))
	for _, d := range devs {
		cons = append(cons, consumer{d, m.Used[d]})
	}
	cons = append(cons, admin...)
	for _, d := range sharedDevs {
		if !m.P.Devices[d].ExistingShared {
			cons = append(cons, consumer{d, m.Used[d]})
		}
	}
	devs = append(devs, sharedDevs...)
	bySet := map[int][]consumer{}
	for _, c := range cons {
		for _, cc := range m.P.Devices[c.dev].Consumes {
			bySet[cc.Set] = append(bySet[cc.Set], c)
		}
	}
	sets := make([]int, 0, len(bySet))
	for s := range bySet {
		sets = append(sets, s)
	}
	sort.Ints(sets)
	for _, si := range sets {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := m.counters(si, bySet[si]); err != nil {
			return nil, err
		}
		g := newGroup(GroupCompat)
		g.Set = si
		m.guarded(&g, func() { m.groups(si, bySet[si]) })
	}
	m.compatibleOnlyWith(devs)
	if opts.DeviceSymmetry {
		m.breakDeviceSymmetry(devs, opts.Fixed)
	}
	return m, nil
}

// breakDeviceSymmetry adds u(d') → u(d) for interchangeable devices d < d'
// of one counter set: the same consumption, groups, nodes and attributes,
// no compatibleOnlyWith, and candidates of exactly the same alternatives.
// Swapping two such devices maps every allocation to another with the same
// objective, so some best allocation uses a prefix of each group. The four
// MPS shares or time-slice slots of a GPU are such a group; without the
// order, proving that a few GPUs cannot take one more claim makes the
// solver try every permutation of them.
func (m *Model) breakDeviceSymmetry(devs []int, fixed []Fixed) {
	held := map[int]bool{}
	for _, f := range fixed {
		for _, d := range f.Devices {
			held[d] = true
		}
	}
	refs := map[int]*strings.Builder{}
	for ui, u := range m.Units {
		for _, x := range u.X {
			b := refs[x.Dev]
			if b == nil {
				b = &strings.Builder{}
				refs[x.Dev] = b
			}
			fmt.Fprintf(b, "%d/%d/%d,", ui, x.Req, x.Alt)
		}
	}
	groups := map[string][]int{}
	var keys []string
	for _, d := range devs {
		dev := m.P.Devices[d]
		if held[d] || len(dev.Incompatible) > 0 || dev.Spec == nil || refs[d] == nil || dev.MultiAlloc {
			continue
		}
		spec, _ := json.Marshal(struct {
			A, C, T, B any
		}{dev.Spec.Attributes, dev.Spec.Capacity, dev.Spec.Taints, dev.Spec.BindingConditions})
		key := fmt.Sprintf("%s|%s|%v|%t|%t|%t|%v|%s|%s", dev.ID.Driver, dev.ID.Pool, dev.Reach, dev.All, dev.NodeLocal, dev.BindsToNode,
			dev.Consumes, spec, refs[d].String())
		if _, ok := groups[key]; !ok {
			keys = append(keys, key)
		}
		groups[key] = append(groups[key], d)
	}
	for _, k := range keys {
		g := groups[k]
		for i := 1; i < len(g); i++ {
			m.clause(m.Used[g[i]].Not(), m.Used[g[i-1]])
		}
	}
}

// consumer is a literal that, when true, takes a device's counters.
type consumer struct {
	dev int
	lit z.Lit
}

func (u *Unit) altOf(x X) *model.Alternative {
	return u.Claims[0].Requests[x.Req].Alternatives[x.Alt]
}

// IsSimple tells whether c is a simple claim (one request for one device,
// no constraints): interchangeable simple claims share one unit.
func IsSimple(c *model.Claim) bool { return simpleKey(c) != "" }

// simpleKey returns a key identical for interchangeable simple claims, or
// "" when the claim is not simple.
func simpleKey(c *model.Claim) string {
	// A claim with an error may have only its first requests built:
	// claimUnit keeps it out.
	if c.Err != nil || c.FixedNode >= 0 || len(c.ExcludedNodes) > 0 || c.Group != nil || len(c.Requests) != 1 || len(c.Constraints) != 0 || len(c.Requests[0].Alternatives) != 1 {
		return ""
	}
	a := c.Requests[0].Alternatives[0]
	// A unit's x(device) stands for one claim of the class: a shared
	// device could serve several, so such claims are units of their own.
	if a.All || a.AdminAccess || a.Count != 1 || a.Shared {
		return ""
	}
	return c.ClassKey()
}

func (m *Model) buildUnits(ctx context.Context, claims []*model.Claim, opts Options) error {
	classes := map[string]*Unit{}
	prevSame := map[string]z.Lit{}
	for i, c := range claims {
		if i%16 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if k := simpleKey(c); k != "" && !opts.PerClaim {
			if u := classes[k]; u != nil {
				u.Claims = append(u.Claims, c)
				continue
			}
			u := &Unit{Claims: []*model.Claim{c}, Simple: true}
			classes[k] = u
			m.Units = append(m.Units, u)
			continue
		}
		u := m.claimUnit(c)
		m.Units = append(m.Units, u)
		if opts.Symmetry {
			k := c.ClassKey()
			if prev, ok := prevSame[k]; ok {
				m.clause(u.Admit.Not(), prev)
			}
			prevSame[k] = u.Admit
		}
	}
	for _, u := range m.Units {
		if !u.Simple {
			continue
		}
		alt := u.Claims[0].Requests[0].Alternatives[0]
		var lits []z.Lit
		for _, d := range m.within(alt.Candidates) {
			if !m.candidate(d) {
				continue
			}
			l := m.C.Lit()
			u.X = append(u.X, X{0, 0, d, l})
			lits = append(lits, l)
		}
		u.Count = logic.NewCardSort(lits, m.C)
		m.clause(u.Count.Leq(len(u.Claims)))
	}
	return nil
}

// claimUnit encodes one non-simple claim.
func (m *Model) claimUnit(c *model.Claim) *Unit {
	u := &Unit{Claims: []*model.Claim{c}, Admit: m.C.Lit()}
	if c.Err != nil {
		m.clause(u.Admit.Not())
		return u
	}
	// Candidate nodes: every node some candidate reaches (or the fixed one).
	needNode, nodeSet := false, map[int]bool{}
	single := len(c.Requests) == 1 && len(c.Requests[0].Alternatives) == 1 &&
		!c.Requests[0].Alternatives[0].All && c.Requests[0].Alternatives[0].Count == 1
	for _, r := range c.Requests {
		for _, a := range r.Alternatives {
			for _, d := range m.within(a.Candidates) {
				if m.allowed != nil && !m.allowed(d) {
					continue
				}
				dev := m.P.Devices[d]
				if !dev.All {
					needNode = true
				}
				for _, n := range dev.Reach {
					nodeSet[n] = true
				}
			}
			if a.All {
				needNode = needNode || len(m.P.Nodes) > 0
			}
		}
	}
	if c.FixedNode >= 0 {
		nodeSet = map[int]bool{c.FixedNode: true}
		needNode = true
	}
	if len(c.ExcludedNodes) > 0 || m.P.Pinning(c) {
		// The node is chosen explicitly, and not among these (a claim
		// tied to its pods' node always chooses one).
		needNode, single = true, false
		if len(nodeSet) == 0 {
			for n := range m.P.Nodes {
				nodeSet[n] = true
			}
		}
		for n := range c.ExcludedNodes {
			delete(nodeSet, n)
		}
		if len(nodeSet) == 0 && len(m.P.Nodes) > 0 {
			m.clause(u.Admit.Not()) // every node is excluded
			return u
		}
	}
	if needNode && !(single && c.FixedNode < 0) {
		for n := range nodeSet {
			u.NodeIdx = append(u.NodeIdx, n)
		}
		sort.Ints(u.NodeIdx) // map order would make the encoding, and so the answer, vary between runs
		if len(nodeSet) == 0 && c.FixedNode < 0 {
			// Only All-mode over allNodes devices: any node will do.
			for n := range m.P.Nodes {
				u.NodeIdx = append(u.NodeIdx, n)
			}
		}
		sort.Ints(u.NodeIdx)
		for range u.NodeIdx {
			u.NodeLit = append(u.NodeLit, m.C.Lit())
		}
		m.exactlyOneIf(u.Admit, u.NodeLit)
	}
	// Under Options.Groups, "all devices reachable from the claim's node"
	// (including a bound pod's node) is a group of its own.
	nodeGroup := newGroup(GroupNode)
	nodeGroup.Claim = c.Index
	nodeLit := func(n int) (z.Lit, bool) {
		i := sort.SearchInts(u.NodeIdx, n)
		if i < len(u.NodeIdx) && u.NodeIdx[i] == n {
			return u.NodeLit[i], true
		}
		return 0, false
	}
	perDevice := map[int][]z.Lit{} // all x of this claim per device
	for ri, r := range c.Requests {
		sels := make([]z.Lit, len(r.Alternatives))
		for ai := range r.Alternatives {
			if len(r.Alternatives) == 1 {
				sels[ai] = u.Admit
			} else {
				sels[ai] = m.C.Lit()
			}
		}
		if len(sels) > 1 {
			m.exactlyOneIf(u.Admit, sels)
		}
		u.Sel = append(u.Sel, sels)
		for ai, a := range r.Alternatives {
			var xs []z.Lit
			for _, d := range m.within(a.Candidates) {
				dev := m.P.Devices[d]
				if !m.candidate(d) || (c.FixedNode >= 0 && !dev.Reaches(c.FixedNode) && !m.groupsOn) {
					continue
				}
				l := m.C.Lit()
				u.X = append(u.X, X{ri, ai, d, l})
				xs = append(xs, l)
				perDevice[d] = append(perDevice[d], l)
				m.clause(l.Not(), sels[ai])
				if u.NodeLit != nil && !dev.All {
					or := []z.Lit{l.Not()}
					for _, n := range dev.Reach {
						if nl, ok := nodeLit(n); ok {
							or = append(or, nl)
						}
					}
					m.guarded(&nodeGroup, func() { m.clause(or...) })
				}
			}
			if a.All {
				m.allMode(u, sels[ai], a, xs, nodeLit)
				continue
			}
			// Exactly Count devices when selected, never more.
			if a.Count == 1 {
				m.atMostOne(xs)
				m.clause(append([]z.Lit{sels[ai].Not()}, xs...)...)
			} else {
				cs := logic.NewCardSort(xs, m.C)
				m.clause(cs.Leq(a.Count))
				m.clause(sels[ai].Not(), cs.Geq(a.Count))
			}
		}
	}
	perDeviceOrder := make([]int, 0, len(perDevice))
	for d := range perDevice {
		perDeviceOrder = append(perDeviceOrder, d)
	}
	sort.Ints(perDeviceOrder) // in map order the clauses, and so the answer, would vary between runs
	for _, d := range perDeviceOrder {
		if !m.P.Devices[d].MultiAlloc { // a shared device may serve several requests
			m.atMostOne(perDevice[d])
		}
	}
	// At most 32 results per claim, all requests together (each x is one
	// result): firstAvailable combinations and All-mode counts past it
	// are infeasible, as upstream.
	if len(u.X) > model.MaxResults && mostResults(c) > model.MaxResults {
		xs := make([]z.Lit, len(u.X))
		ones := make([]int64, len(u.X))
		for i, x := range u.X {
			xs[i], ones[i] = x.Lit, 1
		}
		if err := m.atMost(xs, ones, model.MaxResults); err != nil {
			m.clause(u.Admit.Not())
		}
	}
	m.constraints(u)
	return u
}

// mostResults bounds the results a claim can get: per request the largest
// alternative (All: every matching device).
func mostResults(c *model.Claim) int {
	n := 0
	for _, r := range c.Requests {
		most := 0
		for _, a := range r.Alternatives {
			if a.All {
				most = max(most, len(a.AllMatch))
			} else {
				most = max(most, a.Count)
			}
		}
		n += most
	}
	return n
}

// exactlyOneIf: when g holds exactly one of ls holds; none holds otherwise.
func (m *Model) exactlyOneIf(g z.Lit, ls []z.Lit) {
	m.atMostOne(ls)
	m.clause(append([]z.Lit{g.Not()}, ls...)...)
	for _, l := range ls {
		m.clause(l.Not(), g)
	}
}

// allMode: on the chosen node every matching device must be taken, and a
// node where some matching device cannot be taken is ruled out.
func (m *Model) allMode(u *Unit, sel z.Lit, a *model.Alternative, xs []z.Lit, nodeLit func(int) (z.Lit, bool)) {
	xOf := map[int]z.Lit{}
	i := 0
	for _, x := range u.X {
		if u.altOf(x) == a {
			xOf[x.Dev] = xs[i]
			i++
		}
	}
	if u.NodeLit == nil {
		// No node matters: all matching devices, at least one.
		if len(a.AllMatch) == 0 {
			m.clause(sel.Not())
		}
		for _, d := range a.AllMatch {
			if l, ok := xOf[d]; ok {
				m.clause(sel.Not(), l)
			} else {
				m.clause(sel.Not())
			}
		}
		return
	}
	usable := func(d int) bool { _, ok := xOf[d]; return ok }
	for k, n := range u.NodeIdx {
		nl := u.NodeLit[k]
		devs, ok := a.AllOnNode(m.P, n, usable)
		if !ok {
			m.clause(sel.Not(), nl.Not())
			continue
		}
		for _, d := range devs {
			m.clause(sel.Not(), nl.Not(), xOf[d])
		}
	}
}

// constraints encodes matchAttribute and distinctAttribute of u's claim.
func (m *Model) constraints(u *Unit) {
	c := u.Claims[0]
	for ki, k := range c.Constraints {
		g := newGroup(GroupConstraint)
		g.Claim, g.Constraint = c.Index, ki
		m.guarded(&g, func() { m.constraint(u, k) })
	}
}

// constraint encodes one matchAttribute or distinctAttribute of u's claim.
func (m *Model) constraint(u *Unit, k *model.Constraint) {
	c := u.Claims[0]
	type member struct {
		lit  z.Lit
		vals []string
	}
	byValue := map[string][]z.Lit{}
	var values []string
	var sets []member
	for _, x := range u.X {
		if !k.Applies(c.Requests[x.Req], u.altOf(x)) {
			continue
		}
		vals := k.ValuesOf(u.altOf(x), x.Dev)
		if len(vals) == 0 {
			m.clause(x.Lit.Not()) // the device lacks the attribute
			continue
		}
		sets = append(sets, member{x.Lit, vals})
		for _, v := range vals {
			if byValue[v] == nil {
				values = append(values, v)
			}
			byValue[v] = append(byValue[v], x.Lit)
		}
	}
	switch k.Kind {
	case model.MatchAttribute:
		if len(values) <= 1 {
			return
		}
		// One value is chosen (at most one v true); a device is taken only
		// if it has the chosen value. With list-type attributes a device
		// has several: then all chosen devices share a common element.
		lit := map[string]z.Lit{}
		var vs []z.Lit
		for _, v := range values {
			lit[v] = m.C.Lit()
			vs = append(vs, lit[v])
		}
		for _, s := range sets {
			cl := []z.Lit{s.lit.Not()}
			for _, v := range s.vals {
				cl = append(cl, lit[v])
			}
			m.clause(cl...)
		}
		m.atMostOne(vs)
	case model.DistinctAttribute:
		for _, v := range values {
			m.atMostOne(byValue[v])
		}
	}
}

// counters adds the set's non-implied counter limits over its consumers,
// and the untouched-set literal for packing.
func (m *Model) counters(si int, cons []consumer) error {
	set := m.P.CounterSets[si]
	ds := make([]int, len(cons))
	lits := make([]z.Lit, len(cons))
	for i, c := range cons {
		ds[i], lits[i] = c.dev, c.lit
	}
	implied := m.impliedCounters(set, ds)
	for j := range set.Counters {
		if implied[j] {
			m.ImpliedCounters++
			continue
		}
		w := make([]int64, len(ds))
		for i, d := range ds {
			for _, c := range m.P.Devices[d].Consumes {
				if c.Set == si {
					w[i] = c.Amounts[j]
				}
			}
		}
		g := newGroup(GroupCounter)
		g.Set, g.Counter = si, j
		var err error
		m.guarded(&g, func() { err = m.atMost(lits, w, set.Free[j]) })
		if err != nil {
			return err
		}
	}
	if set.Untouched() {
		t := m.C.Lit()
		or := []z.Lit{t.Not()}
		for _, l := range lits {
			m.clause(l.Not(), t)
			or = append(or, l)
		}
		m.clause(or...)
		m.Touched = append(m.Touched, t)
	}
	return nil
}

// share is one literal that, when true, takes a share of a shared device,
// consuming amounts of its capacities (Device.Capacity order).
type share struct {
	lit     z.Lit
	amounts []int64
}

// shared encodes shared device d: u(d) is the disjunction of its shares,
// and per capacity the shares' consumption stays within what is free.
func (m *Model) shared(d int, ss []share) error {
	dev := m.P.Devices[d]
	lits := make([]z.Lit, len(ss))
	for i, sh := range ss {
		lits[i] = sh.lit
	}
	if len(lits) == 1 {
		m.Used[d] = lits[0]
	} else {
		u := m.C.Lit()
		or := []z.Lit{u.Not()}
		for _, l := range lits {
			m.clause(l.Not(), u)
			or = append(or, l)
		}
		m.clause(or...)
		m.Used[d] = u
	}
	for j, dim := range dev.Capacity {
		w := make([]int64, len(ss))
		for i, sh := range ss {
			if sh.amounts != nil {
				w[i] = sh.amounts[j]
			}
		}
		g := newGroup(GroupCapacity)
		g.Device, g.Counter = d, j
		var err error
		m.guarded(&g, func() {
			if dim.Free < 0 { // existing shares overdraw it: nothing fits
				for _, l := range lits {
					m.clause(l.Not())
				}
				return
			}
			err = m.atMost(lits, w, dim.Free)
		})
		if err != nil {
			return fmt.Errorf("device %s, capacity %s: %w", dev.ID, dim.Name, err)
		}
	}
	return nil
}
